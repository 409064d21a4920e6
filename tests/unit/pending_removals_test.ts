import assert from "node:assert/strict";
import { PendingRemovals } from "../../plugins/runtime/_pending_removals.ts";

/** A fake engine `rm` that fails while `broken` and records every container it removed. */
function fakeEngine() {
  const engine = {
    broken: true,
    calls: 0,
    removed: [] as string[],
    remove: async (name: string) => {
      engine.calls++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (engine.broken) throw new Error("podman: executable file not found");
      engine.removed.push(name);
    },
  };
  return engine;
}

const until = async (done: () => boolean, ms = 5_000) => {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(done(), "the condition never held");
};

Deno.test("a failed removal is retried on a timer until the engine works again", async () => {
  const engine = fakeEngine();
  const pending = new PendingRemovals(engine.remove, { firstDelayMs: 10, maxDelayMs: 40 });
  pending.add("codemode-1", new Error("gone"));
  await until(() => engine.calls >= 3);
  assert.equal(pending.size, 1);
  engine.broken = false;
  await until(() => pending.size === 0);
  assert.deepEqual(engine.removed, ["codemode-1"]);
});

Deno.test("the timer backs off after each failed pass", async () => {
  const engine = fakeEngine();
  const pending = new PendingRemovals(engine.remove, { firstDelayMs: 50, maxDelayMs: 10_000 });
  pending.add("codemode-1", new Error("gone"));
  await new Promise((resolve) => setTimeout(resolve, 600));
  // Doubling delays (50, 100, 200, 400 ms) allow 3 attempts in 600 ms; a fixed 50 ms delay would allow 11.
  assert.ok(engine.calls >= 1 && engine.calls <= 5, `${engine.calls} attempts in 600 ms`);
  engine.broken = false;
  assert.equal(await pending.flush(2_000), true);
});

Deno.test("a retry asked for while one runs shares it and removes every pending container", async () => {
  const engine = fakeEngine();
  const pending = new PendingRemovals(engine.remove, { firstDelayMs: 60_000 });
  pending.add("codemode-1", new Error("gone"));
  pending.add("codemode-2", new Error("gone"));
  engine.broken = false;
  await Promise.all([pending.retry(), pending.retry(), pending.retry()]);
  assert.deepEqual(engine.removed, ["codemode-1", "codemode-2"]);
  assert.equal(engine.calls, 2);
  assert.equal(pending.size, 0);
});

Deno.test("a flush gives up at its bound while the engine stays broken, and succeeds once it works", async () => {
  const engine = fakeEngine();
  const pending = new PendingRemovals(engine.remove, { firstDelayMs: 60_000 });
  pending.add("codemode-1", new Error("gone"));
  const started = Date.now();
  assert.equal(await pending.flush(300), false);
  assert.ok(Date.now() - started < 5_000, "the flush did not keep to its bound");
  assert.ok(engine.calls >= 1);
  engine.broken = false;
  assert.equal(await pending.flush(2_000), true);
  assert.deepEqual(engine.removed, ["codemode-1"]);
});

Deno.test("nothing pending means no engine call and an immediate flush", async () => {
  const engine = fakeEngine();
  const pending = new PendingRemovals(engine.remove);
  await pending.retry();
  assert.equal(await pending.flush(1_000), true);
  assert.equal(engine.calls, 0);
});
