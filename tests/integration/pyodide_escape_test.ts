/**
 * Escape attempts from Python in the pyodide runtime through every JavaScript bridge: each must fail
 * (the failure is asserted), and the session must work afterwards. The host's environment, including a
 * secret set here, must not reach the sandbox.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { denoArgs, denoEnv, findDeno } from "../../plugins/runtime/_pyodide_deno.ts";
import { findPyodideAssets } from "../../plugins/runtime/_pyodide_files.ts";
import type { RunResult } from "../../core/contracts/output.ts";
import { sessions } from "./_harness.ts";
import { JS, pyodideAttempts } from "./_pyodide_attempts.ts";

const STATE = join(tmpdir(), "codemode-test-pyodide");
const SECRET_NAME = "CODEMODE_PYODIDE_TEST_SECRET";
const SECRET = `s3cret-${crypto.randomUUID()}`;
Deno.env.set(SECRET_NAME, SECRET);

const scratch = mkdtempSync(join(tmpdir(), "codemode-test-escape-"));
const hostFile = join(scratch, "host-only.txt");
writeFileSync(hostFile, SECRET);
const target = join(scratch, "pwned.txt");

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const port = listener.addr.port;
let connections = 0;
void (async () => {
  for await (const conn of listener) {
    connections++;
    conn.close();
  }
})().catch(() => {});

const js = JS;
const ATTEMPTS = pyodideAttempts({ stateDir: STATE, hostFile, target, port, secretName: SECRET_NAME });

const test = (name: string, fn: () => Promise<void> | void) =>
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });

function assertNoSecret(result: RunResult): void {
  const text = JSON.stringify(result);
  assert.ok(!text.includes(SECRET), `the host secret leaked: ${text.slice(0, 500)}`);
}

test("every escape attempt through the JS bridges fails, and the session goes on working", async () => {
  const m = sessions(pyodide({ stateDir: STATE }));
  try {
    for (const [what, code, expected] of ATTEMPTS) {
      const r = await m.run("s", code, { timeout: 30 });
      assert.equal(r.status, "error", `${what}: the attempt did not fail: ${JSON.stringify(r)}`);
      assert.match(r.error ?? "", expected, `${what}: unexpected failure`);
      assert.ok(!r.sessionLost, `${what}: the session was lost`);
      assertNoSecret(r);
      assert.equal((await m.run("s", "1 + 1", { timeout: 30 })).value, "2", `${what}: the next run failed`);
    }
    assert.equal(connections, 0, "nothing connected to the listener");
    assert.equal(existsSync(target), false, "no file was written on the host");
  } finally {
    await m.closeAll();
  }
});

test("permissions can't be granted from inside, and Python's file writes stay in memory", async () => {
  const m = sessions(pyodide({ stateDir: STATE }));
  try {
    const asked = await m.run("s", `${js}js.Deno.permissions.requestSync(obj(name='read')).state`, {
      timeout: 30,
    });
    assert.equal(asked.value, "'denied'", JSON.stringify(asked));
    const all = await m.run(
      "s",
      `${js}[js.Deno.permissions.querySync(obj(name=n)).state for n in ` +
        `['read', 'write', 'net', 'env', 'run', 'ffi', 'sys', 'import']]`,
      { timeout: 30 },
    );
    assert.equal(
      all.value,
      "['prompt', 'denied', 'denied', 'denied', 'denied', 'denied', 'denied', 'denied']",
    );
    const written = await m.run(
      "s",
      `import os\nos.makedirs('${scratch}', exist_ok=True)\n` +
        `open('${target}', 'w').write('pwned')\nopen('${target}').read()`,
      { timeout: 30 },
    );
    assert.equal(written.value, "'pwned'", "the write succeeds in Pyodide's in-memory file system");
    assert.equal(existsSync(target), false, "and never reaches the host's");
  } finally {
    await m.closeAll();
  }
});

test("the host's environment does not reach the sandbox", async () => {
  const m = sessions(pyodide({ stateDir: STATE }));
  try {
    // What Python sees is Pyodide's own made-up environment (USER=web_user, PATH=/), none of the host's.
    const r = await m.run("s", "import os\ndict(os.environ)", { timeout: 30 });
    assert.equal(r.status, "ok", r.error);
    assert.match(r.value ?? "", /'USER': 'web_user'/);
    for (const name of [SECRET_NAME, "PATH", "HOME", "USER"]) {
      const value = Deno.env.get(name);
      if (value && value.length > 1) assert.ok(!r.value!.includes(`'${value}'`), `host ${name} leaked`);
    }
    assertNoSecret(r);
    if (Deno.build.os === "linux") {
      const children = readdirSync("/proc").filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
          const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
          return ppid === Deno.pid && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("host-");
        } catch {
          return false;
        }
      });
      assert.equal(children.length, 1, "one deno subprocess for the session");
      const environ = readFileSync(`/proc/${children[0]}/environ`, "utf8").split("\0").filter(Boolean);
      assert.deepEqual(
        environ.map((entry) => entry.split("=")[0]).sort(),
        ["DENO_DIR", "DENO_NO_PROMPT", "DENO_NO_UPDATE_CHECK", "NO_COLOR"],
      );
      assert.ok(!environ.join("\n").includes(SECRET));
    }
  } finally {
    await m.closeAll();
  }
});

test("with eval allowed, the subprocess's permissions alone still stop imports, reads and processes", () => {
  // The same command line minus --disallow-code-generation-from-strings, running a probe instead of the
  // host program: what Python could do if it ever reached eval or import().
  const json = join(scratch, "secret.json");
  writeFileSync(json, JSON.stringify({ secret: SECRET }));
  const probe = join(scratch, "probe.mjs");
  writeFileSync(
    probe,
    `const results = {};
const attempt = async (name, fn) => {
  try { results[name] = "allowed: " + String(await fn()); } catch (error) { results[name] = String(error); }
};
await attempt("eval", () => eval("1 + 1"));
await attempt("fs", async () => (await import("node:fs")).readFileSync(${JSON.stringify(hostFile)}, "utf8"));
await attempt("child_process", async () => (await import("node:child_process")).execFileSync("/usr/bin/id"));
// Through eval, like code arriving at run time: Deno pre-loads string-literal imports in the program itself.
const spec = ${JSON.stringify(`import("file://${json}", { with: { type: "json" } })`)};
await attempt("json", async () => JSON.stringify((await eval(spec)).default));
await attempt("net", async () => {
  const socket = (await import("node:net")).connect(${port}, "127.0.0.1");
  return await new Promise((resolve, reject) => socket.on("connect", () => resolve("connected")).on("error", reject));
});
console.log(JSON.stringify(results));`,
  );
  const assets = findPyodideAssets([Deno.cwd()])!;
  const args = denoArgs({
    deno: findDeno(undefined, [Deno.cwd()])!,
    program: probe,
    readable: [assets, join(STATE, "pyodide")],
    heapBytes: 256 * 2 ** 20,
    config: { mode: "serve", assets, memoryBytes: 1 },
  }).map((arg) => arg.startsWith("--v8-flags=") ? "--v8-flags=--max-old-space-size=256" : arg);
  const run = spawnSync(args[0], args.slice(1), { env: denoEnv(probe), encoding: "utf8", timeout: 60_000 });
  const results = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "{}");
  assert.equal(results.eval, "allowed: 2", `the probe runs with eval on: ${run.stderr}`);
  assert.match(results.fs, /Requires read access/);
  assert.match(results.child_process, /Requires (run|env) access/);
  assert.match(results.json, /Requires read access/);
  assert.match(results.net, /Requires net access/);
  assert.ok(!run.stdout.includes(SECRET));
  assert.equal(connections, 0);
});

test("cleanup", async () => {
  listener.close();
  rmSync(scratch, { recursive: true, force: true });
  Deno.env.delete(SECRET_NAME);
  await Promise.resolve();
});
