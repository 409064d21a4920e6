/**
 * The upstream pool under Bun, the compiled binary's runtime, whose stdio transport spawns servers with
 * `Bun.spawn` instead of `node:child_process` (core/upstream/server_process.ts): calls, a large result
 * and the message cap, a crash and restart, timeouts and aborts cancelled on the server, a command that
 * cannot start, and close() ending the whole process tree. The scenarios run in Bun
 * (tests/testdata/bun/upstream_scenarios.ts); the same behaviour under Deno is upstream_faults_test.ts.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test("under Bun, stdio servers spawned with Bun.spawn keep every guarantee of the pool", async () => {
  const output = await new Deno.Command(`${ROOT}node_modules/.bin/bun`, {
    args: [`${ROOT}tests/testdata/bun/upstream_scenarios.ts`],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, `${stdout}\n${stderr.slice(-3000)}`);
  assert.deepEqual(stdout.split("\n").filter((line) => line.startsWith("ok ")), [
    "ok calls and a 5 MB result",
    "ok a burst of 40 1 MB results is handled in slices (the pipe paused and resumed), each whole",
    "ok a crash fails its call with the exit code and the next call restarts",
    "ok timeouts and aborts cancel the call on the server",
    "ok a command that cannot start fails clearly",
    "ok close() ends the server's whole process tree",
  ]);
});
