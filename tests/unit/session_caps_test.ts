import assert from "node:assert/strict";
import { stats } from "../../core/observe/stats.ts";
import type { RuntimePlugin, SandboxProcess } from "../../core/contracts/runtime.ts";
import type { RunResult } from "../../core/contracts/output.ts";
import type { SessionManager } from "../../core/sandbox/session_manager.ts";
import { fakeSandboxProcess, fakeSessions } from "./_fake_runtime.ts";
import { RunSlots } from "../../core/sandbox/run_slots.ts";

/** Counts what the fake sandboxes did across the whole runtime. */
interface Tally {
  started: number;
  stopped: number;
  running: number;
  mostAtOnce: number;
  /** Execute frames received. */
  runs: number;
}

/**
 * A runtime whose sandboxes speak the protocol: code "sleep N" finishes after N ms, or at its timeout
 * with status "timeout".
 */
function fakeRuntime(): RuntimePlugin & { tally: Tally } {
  const tally: Tally = { started: 0, stopped: 0, running: 0, mostAtOnce: 0, runs: 0 };
  const process = (): SandboxProcess => {
    tally.started++;
    return fakeSandboxProcess({
      onEnd: () => tally.stopped++,
      onExecute: (frame, send) => {
        const ms = Number(/^sleep (\d+)$/.exec(frame.code)?.[1] ?? 0);
        const limit = frame.timeout * 1000;
        tally.runs++;
        tally.mostAtOnce = Math.max(tally.mostAtOnce, ++tally.running);
        setTimeout(() => {
          tally.running--;
          send({ type: "done", id: frame.id, status: ms > limit ? "timeout" : "ok" });
        }, Math.min(ms, limit));
      },
    });
  };
  return {
    name: "fake",
    tally,
    detect: () => Promise.resolve({ name: "fake", available: true, problems: [] }),
    start: () => Promise.resolve(process()),
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
  };
}

function manager(runtime: RuntimePlugin, caps: { maxSessions?: number; maxRuns?: number }): SessionManager {
  return fakeSessions(runtime, { graceSeconds: 1, ...caps });
}

Deno.test("RunSlots grants in arrival order and a waiter gives up at its deadline or abort", async () => {
  const slots = new RunSlots(1);
  const first = await slots.acquire(1000);
  assert.ok(first);
  assert.equal(slots.full, true);
  const order: string[] = [];
  const second = slots.acquire(5000).then((r) => (order.push("second"), r));
  const third = slots.acquire(5000).then((r) => (order.push("third"), r));
  const late = await slots.acquire(20);
  assert.equal(late, undefined, "a waiter past its deadline gets no slot");
  const controller = new AbortController();
  const aborted = slots.acquire(5000, controller.signal);
  controller.abort();
  assert.equal(await aborted, undefined);
  assert.equal(slots.waiting, 2);
  first();
  first(); // releasing twice frees one slot only
  (await second)!();
  (await third)!();
  assert.deepEqual(order, ["second", "third"]);
  assert.deepEqual([slots.running, slots.waiting], [0, 0]);
  const open = new RunSlots();
  await Promise.all([open.acquire(0), open.acquire(0), open.acquire(0)]);
  assert.equal(open.full, false, "no cap never waits");
});

Deno.test("with maxRuns, runs of different sessions wait their turn and are told they waited", async () => {
  const runtime = fakeRuntime();
  const sessions = manager(runtime, { maxRuns: 2 });
  try {
    const results = await Promise.all(
      ["a", "b", "c", "d", "e"].map((key) => sessions.run(key, "sleep 150", { timeout: 30 })),
    );
    assert.deepEqual(results.map((r) => r.status), ["ok", "ok", "ok", "ok", "ok"], "every run was answered");
    assert.equal(runtime.tally.mostAtOnce, 2);
    const told = results.filter((r) =>
      r.notes?.some((n) => /waited .*s for a run slot \(CODEMODE_MAX_RUNS allows 2 at once\)/.test(n))
    );
    assert.equal(told.length, 3);
  } finally {
    await sessions.closeAll();
  }
  assert.equal(runtime.tally.stopped, runtime.tally.started, "no sandbox left running");
});

Deno.test("a run that gets no slot within its timeout ends as a timeout, and nothing of it ran", async () => {
  const runtime = fakeRuntime();
  const sessions = manager(runtime, { maxRuns: 1 });
  try {
    const long = sessions.run("a", "sleep 1500", { timeout: 30 });
    await new Promise((r) => setTimeout(r, 100));
    const queued = await sessions.run("b", "sleep 10", { timeout: 0.3 });
    assert.equal(queued.status, "timeout");
    assert.match(
      queued.error!,
      /^Waited 0.3s for a run slot and none came free \(CODEMODE_MAX_RUNS allows 1 at once\); nothing ran/,
    );
    assert.equal(runtime.tally.runs, 1, "the queued code never reached a sandbox");
    assert.equal((await long).status, "ok");
    assert.equal(runtime.tally.mostAtOnce, 1);
    const controller = new AbortController();
    const blocker = sessions.run("a", "sleep 500", { timeout: 30 });
    await new Promise((r) => setTimeout(r, 50));
    const cancelled = sessions.run("b", "sleep 10", { timeout: 30, signal: controller.signal });
    controller.abort();
    const result: RunResult = await cancelled;
    assert.equal(result.status, "cancelled");
    assert.match(result.error!, /Cancelled while waiting for a run slot/);
    await blocker;
    assert.equal((await sessions.run("b", "sleep 1", { timeout: 5 })).status, "ok", "the session is intact");
  } finally {
    await sessions.closeAll();
  }
});

Deno.test("past maxSessions the least recently used idle session is stopped to make room", async () => {
  const runtime = fakeRuntime();
  const sessions = manager(runtime, { maxSessions: 2 });
  try {
    await sessions.run("a", "sleep 1", { timeout: 5 });
    await sessions.run("b", "sleep 1", { timeout: 5 });
    await sessions.run("a", "sleep 1", { timeout: 5 }); // b is now the least recently used
    await sessions.run("c", "sleep 1", { timeout: 5 });
    assert.equal(sessions.size, 2);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual([runtime.tally.started, runtime.tally.stopped], [3, 1]);
    await sessions.run("a", "sleep 1", { timeout: 5 });
    assert.equal(runtime.tally.started, 3, "a kept its sandbox");
    await sessions.run("b", "sleep 1", { timeout: 5 });
    assert.equal(runtime.tally.started, 4, "b starts afresh");
  } finally {
    await sessions.closeAll();
  }
  assert.equal(runtime.tally.stopped, runtime.tally.started);
});

Deno.test("past maxSessions with every session busy, the new session's run is refused with an error result", async () => {
  const runtime = fakeRuntime();
  const sessions = manager(runtime, { maxSessions: 2 });
  try {
    const busy = [
      sessions.run("a", "sleep 400", { timeout: 5 }),
      sessions.run("b", "sleep 400", { timeout: 5 }),
    ];
    await new Promise((r) => setTimeout(r, 50));
    const errorsBefore = (await stats.snapshot()).runs.error;
    const refused = await sessions.run("c", "sleep 1", { timeout: 5 });
    assert.equal(refused.status, "error");
    assert.equal((await stats.snapshot()).runs.error, errorsBefore + 1, "a refused run is counted");
    assert.equal(
      refused.error,
      "All 2 sandbox sessions are running code (CODEMODE_MAX_SESSIONS=2), so no new session can start; try again when a run has finished",
    );
    await assert.rejects(sessions.warm("c"), /CODEMODE_MAX_SESSIONS=2/);
    assert.deepEqual((await Promise.all(busy)).map((r) => r.status), ["ok", "ok"]);
    assert.equal(
      (await sessions.run("c", "sleep 1", { timeout: 5 })).status,
      "ok",
      "room again once one is idle",
    );
    assert.equal(runtime.tally.started, 3);
  } finally {
    await sessions.closeAll();
  }
});

Deno.test("hasRoom() and busy() say whether a new session fits and whether a session runs code", async () => {
  const runtime = fakeRuntime();
  const sessions = manager(runtime, { maxSessions: 2 });
  try {
    assert.equal(sessions.hasRoom(), true, "no session yet");
    await sessions.run("a", "sleep 1", { timeout: 30 });
    const slow = [
      sessions.run("a", "sleep 300", { timeout: 30 }),
      sessions.run("b", "sleep 300", { timeout: 30 }),
    ];
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual([sessions.busy("a"), sessions.busy("b"), sessions.busy("c")], [true, true, false]);
    assert.equal(sessions.hasRoom(), false, "both sessions at the cap run code: none can make way");
    await Promise.all(slow);
    assert.equal(sessions.busy("a"), false);
    assert.equal(sessions.hasRoom(), true, "at the cap, an idle session would make way");
  } finally {
    await sessions.closeAll();
  }
  assert.equal(sessions.hasRoom(), false, "a closed manager takes no session");
});
