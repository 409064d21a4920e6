/**
 * The upstream pool's stdio servers under Bun, whose transport spawns with `Bun.spawn`
 * (core/upstream/server_process.ts): run by tests/integration/upstream_bun_test.ts as
 * `bun tests/testdata/bun/upstream_scenarios.ts`; prints "ok <scenario>" for each that held, and exits
 * non-zero at the first that did not.
 * @module
 */
import assert from "node:assert/strict";
import process from "node:process";
import type { ServerSpec } from "../../../core/contracts/discovery.ts";
import {
  UpstreamCancelledError,
  UpstreamExitedError,
  UpstreamPool,
  UpstreamResultTooLargeError,
  UpstreamStartError,
  UpstreamTimeoutError,
} from "../../../core/upstream/pool.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const source = { plugin: "test", file: "test", key: "test" };
const faulty = (name: string, extra: Partial<ServerSpec> = {}): ServerSpec => ({
  name,
  transport: "stdio",
  command: `${ROOT}node_modules/.bin/deno`,
  args: ["run", "-A", "--config", `${ROOT}deno.json`, `${ROOT}tests/testdata/servers/faulty_server.ts`],
  source,
  ...extra,
});
const text = (result: { content: unknown[] }) => (result.content as { text: string }[])[0].text;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function scenario(name: string, fn: () => Promise<void>): Promise<void> {
  await fn();
  console.log(`ok ${name}`);
}

assert.ok("Bun" in globalThis, "run this with bun");
const pool = new UpstreamPool([
  faulty("f"),
  faulty("h", { timeoutMs: 300 }),
  { name: "missing", transport: "stdio", command: "/nonexistent/codemode-server", source },
], { maxMessageBytes: 8 * 1024 * 1024 });
try {
  await scenario("calls and a 5 MB result", async () => {
    await pool.listTools("f");
    assert.equal(text(await pool.callTool("f", "echo", { message: "hi" })), "hi");
    assert.equal(text(await pool.callTool("f", "big", { mb: 5 })).length, 5 * 1024 * 1024);
    await assert.rejects(pool.callTool("f", "big", { mb: 9 }), UpstreamResultTooLargeError);
    assert.equal(text(await pool.callTool("f", "echo", { message: "after" })), "after");
  });
  await scenario("a burst of 40 1 MB results is handled in slices (the pipe paused and resumed), each whole", async () => {
    const replies = await Promise.all(Array.from({ length: 40 }, () => pool.callTool("f", "big", { mb: 1 })));
    for (const reply of replies) assert.equal(text(reply).length, 1024 * 1024);
    assert.equal(text(await pool.callTool("f", "echo", { message: "after the burst" })), "after the burst");
  });
  await scenario("a crash fails its call with the exit code and the next call restarts", async () => {
    const before = text(await pool.callTool("f", "pid"));
    await assert.rejects(pool.callTool("f", "crash", { code: 7 }), (error: Error) =>
      error instanceof UpstreamExitedError && /exited \(code 7\)/.test(error.message));
    assert.notEqual(text(await pool.callTool("f", "pid")), before);
    assert.equal(pool.status("f").restarts, 1);
  });
  await scenario("timeouts and aborts cancel the call on the server", async () => {
    await pool.listTools("h");
    await assert.rejects(pool.callTool("h", "hang"), UpstreamTimeoutError);
    const controller = new AbortController();
    const call = pool.callTool("h", "hang", {}, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(call, UpstreamCancelledError);
    let cancelled = "";
    for (let i = 0; i < 50 && cancelled !== "2"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      cancelled = text(await pool.callTool("h", "cancellations"));
    }
    assert.equal(cancelled, "2");
  });
  await scenario("a command that cannot start fails clearly", async () => {
    await assert.rejects(pool.callTool("missing", "x"), (error: Error) =>
      error instanceof UpstreamStartError && /failed to start: .*ENOENT|failed to start: .*not found|No such file/i.test(error.message));
  });
  await scenario("close() ends the server's whole process tree", async () => {
    const server = Number(text(await pool.callTool("f", "pid")));
    const child = Number(text(await pool.callTool("f", "spawn_child")));
    assert.ok(alive(server) && alive(child));
    await pool.close();
    for (let i = 0; i < 50 && (alive(server) || alive(child)); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(!alive(server), "the server is gone");
    assert.ok(!alive(child), "its child is gone");
  });
} finally {
  await pool.close();
}
process.exit(0);
