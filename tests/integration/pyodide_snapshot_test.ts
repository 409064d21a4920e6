/**
 * The Pyodide start-up snapshot as sessions meet it: codemode's sparse layout restored straight into the
 * wasm memory, with the sandbox runtime preloaded. A session whose runtime modules differ from the
 * preloaded ones gets its own; sandboxes restored from one image do not share random state; a damaged
 * snapshot stops the start with a clear error instead of running a broken interpreter.
 */
import assert from "node:assert/strict";
import { readdirSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { SandboxSession } from "../../core/sandbox/session.ts";
import type { HostFrame } from "../../core/sandbox/protocol.ts";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { bootstrapFrame, MODULES, SANDBOX_RUNTIME } from "../../sandbox/source.ts";
import { echoRpc, pyodideStart } from "./_harness.ts";

const STATE = join(tmpdir(), "codemode-test-pyodide-preload");
const runtime = () => pyodide({ stateDir: STATE, preload: SANDBOX_RUNTIME });
const start = pyodideStart("codemode-test-pyodide-preload");
const test = (name: string, fn: () => Promise<void> | void) =>
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });

/** Starts a session on `r`, runs `code` and returns its value; the session is closed afterwards. */
async function valueOf(r: RuntimePlugin, code: string, bootstrap?: HostFrame): Promise<string | undefined> {
  const session = new SandboxSession({
    runtime: r,
    sandbox: start,
    bootstrap: bootstrap ?? bootstrapFrame({ max_output: 1 << 20, servers: [] }),
    rpc: echoRpc,
    maxOutput: 1 << 20,
  });
  await session.start();
  try {
    const result = await session.execute(code, { timeout: 30 });
    assert.equal(result.status, "ok", result.error);
    return result.value;
  } finally {
    await session.close();
  }
}

/** The snapshot files in the state directory. */
const snapshots = () => {
  const dir = join(STATE, "pyodide");
  return readdirSync(dir).flatMap((version) =>
    readdirSync(join(dir, version)).filter((f) => f.startsWith("snapshot-")).map((f) => join(dir, version, f))
  );
};

test("a session restored from the preloaded snapshot finds the runtime imported and runs code", async () => {
  rmSync(STATE, { recursive: true, force: true });
  const r = runtime();
  const value = await valueOf(
    r,
    "import sys\nwanted = ['codemode_runtime.artifacts', 'codemode_runtime.context', 'codemode_runtime.display']\n" +
      "([m for m in wanted if m in sys.modules], 6 * 7)",
  );
  assert.equal(
    value,
    "(['codemode_runtime.artifacts', 'codemode_runtime.context', 'codemode_runtime.display'], 42)",
  );
  assert.equal(snapshots().length, 1, "one snapshot was made and kept");
});

test("a session whose runtime modules differ from the preloaded ones runs its own", async () => {
  const marked = {
    ...MODULES,
    "mcp._literals": `${MODULES["mcp._literals"]}\nCODEMODE_TEST_MARK = "mine"\n`,
  };
  const frame = { ...bootstrapFrame({ max_output: 1 << 20, servers: [] }), modules: marked };
  const r = runtime();
  assert.equal(await valueOf(r, "import mcp._literals\nmcp._literals.CODEMODE_TEST_MARK", frame), "'mine'");
  assert.equal(
    await valueOf(r, "import mcp._literals\nhasattr(mcp._literals, 'CODEMODE_TEST_MARK')"),
    "False",
  );
});

test("sandboxes restored from one snapshot draw different random numbers", async () => {
  const r = runtime();
  const code = "import random\nrandom.random()";
  const [a, b] = [await valueOf(r, code), await valueOf(r, code)];
  assert.notEqual(a, b);
});

test("a damaged snapshot stops the start with an error that names it, and a good one works again", async () => {
  const [path] = snapshots();
  const r = runtime();
  truncateSync(path, 100_000);
  await assert.rejects(valueOf(r, "1"), /snapshot is truncated/);
  writeFileSync(path, "not a snapshot at all".repeat(100));
  await assert.rejects(valueOf(r, "1"), /not a codemode snapshot/);
  rmSync(path);
  assert.equal(
    await valueOf(runtime(), "1 + 1"),
    "2",
    "a missing snapshot is put back (copied from the prebuilt one, or made)",
  );
});
