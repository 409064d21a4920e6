import assert from "node:assert/strict";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { fakeRuntime, fakeSessions } from "./_fake_runtime.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const manager = fakeSessions;

/** Waits until `check` holds (or fails after `ms`). */
async function until(check: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await sleep(10);
  }
}

Deno.test("prewarm() starts one sandbox, and the first run uses it instead of starting another", async () => {
  const runtime = fakeRuntime();
  const m = manager(runtime);
  try {
    assert.equal(m.prewarm("client"), true);
    await until(() => runtime.tally.launched === 1);
    await m.warm("client");
    const result = await m.run("client", "1 + 1", { timeout: 5 });
    assert.equal(result.status, "ok");
    assert.equal(runtime.tally.launched, 1);
    assert.equal(runtime.tally.runs, 1);
    assert.equal(m.prewarm("client"), false, "a key with a session is not prewarmed again");
  } finally {
    await m.closeAll();
  }
});

Deno.test("a run that arrives during the prewarm joins its start: one sandbox, not two", async () => {
  const runtime = fakeRuntime({ launchMs: 100, readyMs: 200 });
  const m = manager(runtime);
  try {
    m.prewarm("client");
    await sleep(20);
    const [a, b] = await Promise.all([
      m.run("client", "'a'", { timeout: 5 }),
      m.run("client", "'b'", { timeout: 5 }),
    ]);
    assert.deepEqual([a.status, b.status], ["ok", "ok"]);
    assert.equal(runtime.tally.launched, 1);
  } finally {
    await m.closeAll();
  }
});

Deno.test("prewarm stays within the session cap and never evicts a session", async () => {
  const runtime = fakeRuntime();
  const m = manager(runtime, { maxSessions: 2 });
  try {
    await m.run("busy", "1", { timeout: 5 });
    assert.equal(m.prewarm("a"), true);
    assert.equal(m.prewarm("b"), false, "the cap is reached");
    assert.equal(m.size, 2);
    await until(() => runtime.tally.launched === 2);
    assert.equal(runtime.tally.ended, 0, "nothing was evicted for a prewarm");
  } finally {
    await m.closeAll();
  }
});

Deno.test("an unused prewarmed sandbox is stopped by the idle timeout", async () => {
  const runtime = fakeRuntime({ readyMs: 50 });
  const m = manager(runtime, { idleTimeout: 0.2 });
  try {
    m.prewarm("client");
    await until(() => runtime.tally.launched === 1);
    await until(() => runtime.tally.ended === 1, 2000);
    assert.equal(m.size, 0);
    // A later run starts a fresh one.
    assert.equal((await m.run("client", "1", { timeout: 5 })).status, "ok");
    assert.equal(runtime.tally.launched, 2);
  } finally {
    await m.closeAll();
  }
});

Deno.test("closing while a prewarm is still launching ends the sandbox the runtime hands over", async () => {
  const runtime = fakeRuntime({ launchMs: 200 });
  const m = manager(runtime);
  m.prewarm("client");
  await sleep(50);
  const closing = performance.now();
  await m.close("client");
  await until(() => runtime.tally.launched === 1);
  await until(() => runtime.tally.ended === 1, 1000);
  assert.ok(performance.now() - closing < 1000);
  await m.closeAll();
});

Deno.test("shutting down while a prewarmed sandbox bootstraps kills it at once", async () => {
  const runtime = fakeRuntime({ readyMs: 5_000 });
  const m = manager(runtime);
  m.prewarm("client");
  await until(() => runtime.tally.launched === 1);
  const started = performance.now();
  await m.closeAll();
  assert.equal(runtime.tally.ended, 1);
  assert.ok(performance.now() - started < 1000, "did not wait for the bootstrap to finish");
  assert.equal(m.prewarm("other"), false, "no prewarm after shutdown");
});

Deno.test("a prewarm that failed is simply retried by the first run, with no note about lost state", async () => {
  const runtime = fakeRuntime({ launchMs: 50, failStart: (n) => n === 1 });
  const m = manager(runtime);
  try {
    m.prewarm("client");
    await sleep(10);
    const result = await m.run("client", "1", { timeout: 5 });
    assert.equal(result.status, "ok");
    assert.deepEqual(result.notes ?? [], []);
    assert.equal(runtime.tally.launched, 1);
  } finally {
    await m.closeAll();
  }
});

Deno.test("a start that fails on a cached verdict is tried once more with the runtime chosen afresh", async () => {
  const stale = fakeRuntime({ name: "stale", failStart: () => true });
  const fresh = fakeRuntime({ name: "fresh" });
  let choice: RuntimePlugin = stale;
  const heard: string[] = [];
  const m = manager(() => Promise.resolve(choice), {
    onStartFailure: (runtime) => {
      heard.push(runtime.name);
      choice = fresh;
      return Promise.resolve(runtime === stale);
    },
  });
  try {
    const result = await m.run("client", "1", { timeout: 5 });
    assert.equal(result.status, "ok");
    assert.deepEqual(heard, ["stale"]);
    assert.equal(fresh.tally.launched, 1);
  } finally {
    await m.closeAll();
  }
  // A failure on a fresh verdict is reported, after being heard, and not retried.
  const broken = fakeRuntime({ failStart: () => true });
  const heardAgain: string[] = [];
  const n = manager(broken, {
    onStartFailure: (runtime) => (heardAgain.push(runtime.name), Promise.resolve(false)),
  });
  await assert.rejects(n.run("client", "1", { timeout: 5 }), /fake start 1 failed/);
  assert.deepEqual(heardAgain, ["fake"]);
  await n.closeAll();
});
