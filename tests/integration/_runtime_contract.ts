/**
 * The runtime contract suite: the behaviours every runtime plugin must show through a real sandbox
 * session. Each runtime's test file calls `runtimeContract()` (one suite, many implementations).
 * @module
 */
import assert from "node:assert/strict";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { assertNoLeftovers, ownSandboxes, sessions } from "./_harness.ts";

/** What a runtime can do beyond the core contract. */
export interface RuntimeTraits {
  /** Child processes (os.system) exist; false for Pyodide. */
  subprocess: boolean;
  /** listManaged() sees running sandboxes; false for runtimes without containers. */
  listsSandboxes: boolean;
}

/** Registers the contract tests for one runtime; `skipReason` (if any) marks them ignored, loudly. */
export function runtimeContract(
  label: string,
  make: () => RuntimePlugin,
  skipReason?: string,
  traits: RuntimeTraits = { subprocess: true, listsSandboxes: true },
) {
  if (skipReason) console.warn(`IGNORED ${label} contract suite: ${skipReason}`);
  const test = (name: string, fn: (runtime: RuntimePlugin) => Promise<void>) =>
    Deno.test({
      name: `${label}: ${name}`,
      ignore: Boolean(skipReason),
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => fn(make()),
    });

  test("runs code, keeps state across calls, captures output and returns the last value", async (runtime) => {
    const m = sessions(runtime);
    try {
      const first = await m.run(
        "s",
        "import os, sys\nx = 41\nprint('out')\nprint('err', file=sys.stderr)",
        { timeout: 30 },
      );
      assert.equal(first.status, "ok", first.error);
      assert.equal(first.stdout, "out\n");
      assert.equal(first.stderr, "err\n");
      const child = traits.subprocess
        ? "os.system('echo hi; echo oops >&2')"
        : "os.write(1, b'hi\\n'); os.write(2, b'oops\\n')";
      const second = await m.run("s", `x += 1\n${child}\nx`, { timeout: 30 });
      assert.equal(second.status, "ok", second.error);
      assert.equal(second.stdout, "hi\n");
      assert.equal(second.stderr, "oops\n");
      assert.equal(second.value, "42");
      const awaited = await m.run("s", "import asyncio\nawait asyncio.sleep(0.01)\n'done'", { timeout: 30 });
      assert.equal(awaited.value, "'done'");
    } finally {
      await m.closeAll();
    }
    await assertNoLeftovers(runtime);
  });

  test("reports a raised exception with the user's frames only", async (runtime) => {
    const m = sessions(runtime);
    try {
      const r = await m.run("s", "def f():\n    raise ValueError('bad value')\nf()", { timeout: 30 });
      assert.equal(r.status, "error");
      assert.match(r.error ?? "", /ValueError: bad value/);
      assert.match(r.error ?? "", /line 2, in f/);
      assert.doesNotMatch(r.error ?? "", /codemode_runtime|executor\.py|kernel\.py/);
      assert.equal((await m.run("s", "1 + 1", { timeout: 30 })).value, "2");
    } finally {
      await m.closeAll();
    }
  });

  test("interrupts a run at its timeout and keeps the session usable", async (runtime) => {
    const m = sessions(runtime);
    try {
      await m.run("s", "kept = 'yes'", { timeout: 30 });
      const r = await m.run("s", "while True:\n    pass", { timeout: 1 });
      assert.equal(r.status, "timeout");
      assert.ok(!r.sessionLost, "an interruptible run must not lose the session");
      const after = await m.run("s", "kept", { timeout: 30 });
      assert.equal(after.value, "'yes'");
    } finally {
      await m.closeAll();
    }
  });

  test("kills a sandbox that ignores the interrupt and starts a fresh one next time", async (runtime) => {
    const m = sessions(runtime, { graceSeconds: 1 });
    try {
      await m.run("s", "kept = 1", { timeout: 30 });
      const code =
        "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except BaseException:\n        pass";
      const r = await m.run("s", code, { timeout: 1 });
      assert.equal(r.status, "timeout");
      assert.equal(r.sessionLost, true);
      if (traits.listsSandboxes) assert.deepEqual(await ownSandboxes(runtime), []);
      const fresh = await m.run("s", "'kept' in globals()", { timeout: 30 });
      assert.equal(fresh.value, "False");
    } finally {
      await m.closeAll();
    }
    await assertNoLeftovers(runtime);
  });

  test("stops an idle sandbox and starts a fresh one on the next call", async (runtime) => {
    const m = sessions(runtime, { idleTimeout: 1 });
    try {
      await m.run("s", "y = 1", { timeout: 30 });
      assert.equal(m.size, 1);
      if (traits.listsSandboxes) assert.equal((await ownSandboxes(runtime)).length, 1);
      await new Promise((r) => setTimeout(r, 2500));
      await assertNoLeftovers(runtime);
      assert.equal(m.size, 0);
      assert.equal((await m.run("s", "'y' in globals()", { timeout: 30 })).value, "False");
    } finally {
      await m.closeAll();
    }
    await assertNoLeftovers(runtime);
  });

  test("keeps separate sessions apart and removes every sandbox on shutdown", async (runtime) => {
    const m = sessions(runtime);
    await Promise.all([m.run("a", "who = 'a'", { timeout: 30 }), m.run("b", "who = 'b'", { timeout: 30 })]);
    assert.equal((await m.run("a", "who", { timeout: 30 })).value, "'a'");
    assert.equal((await m.run("b", "who", { timeout: 30 })).value, "'b'");
    assert.equal(m.size, 2);
    if (traits.listsSandboxes) assert.equal((await ownSandboxes(runtime)).length, 2);
    await m.closeAll();
    await assertNoLeftovers(runtime);
  });
}
