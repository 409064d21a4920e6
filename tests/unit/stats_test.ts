import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SAMPLES, Stats } from "../../core/observe/stats.ts";
import { readLiveSnapshots, statsDir, StatsPublisher } from "../../core/observe/stats_file.ts";
import { renderStats } from "../../cli/stats.ts";

const stateDir = () => mkdtempSync(join(tmpdir(), "codemode-stats-"));
/** A pid no process can have (above Linux's largest pid_max). */
const DEAD_PID = 4_194_304 + 12_345;

Deno.test("upstream calls are counted per server and tool with failures, isError results and percentiles", async () => {
  const stats = new Stats();
  for (let ms = 1; ms <= 100; ms++) stats.upstreamCall("everything", "echo", ms, "ok");
  stats.upstreamCall("everything", "get-sum", 7, "tool_error");
  stats.upstreamCall("everything", "get-sum", 9, "error");
  stats.upstreamCall("memory", "read_graph", 2, "ok");
  const [everything, memory] = (await stats.snapshot()).upstream;
  assert.equal(everything.server, "everything");
  assert.deepEqual(
    { count: everything.count, errors: everything.errors, toolErrors: everything.toolErrors },
    { count: 102, errors: 1, toolErrors: 1 },
  );
  const [echo, sum] = everything.tools;
  assert.deepEqual(echo, {
    tool: "echo",
    count: 100,
    errors: 0,
    toolErrors: 0,
    meanMs: 50.5,
    p50Ms: 50,
    p95Ms: 95,
    maxMs: 100,
  });
  assert.deepEqual([sum.tool, sum.count, sum.errors, sum.toolErrors], ["get-sum", 2, 1, 1]);
  assert.equal(memory.tools[0].tool, "read_graph");
});

Deno.test("percentiles cover the most recent samples while count, mean and max cover every call", async () => {
  const stats = new Stats();
  for (let i = 0; i < 1000; i++) stats.rpc("call_tool", 1000, true);
  for (let i = 0; i < SAMPLES; i++) stats.rpc("call_tool", 1, true);
  const [rpc] = (await stats.snapshot()).rpc;
  assert.equal(rpc.count, 1000 + SAMPLES);
  assert.equal(rpc.errors, 0);
  assert.equal(rpc.p95Ms, 1);
  assert.equal(rpc.maxMs, 1000);
  assert.ok(rpc.meanMs > 700);
});

Deno.test("runs are counted by outcome, sandboxes by launch and exit reason, with the running ones and their isolation", async () => {
  const stats = new Stats();
  stats.run("ok", 10);
  stats.run("ok", 20);
  stats.run("timeout", 1000);
  stats.run("cancelled", 300);
  stats.sandboxLaunched(150, true, { name: "a", runtime: "podman", isolation: "gvisor" });
  stats.sandboxLaunched(250, true, { name: "b", runtime: "pyodide", isolation: "wasm" });
  stats.sandboxLaunched(0, false);
  stats.sandboxExited("idle", "b");
  stats.malformedFrame();
  stats.upstreamStart("s", true);
  stats.upstreamStart("s", false);
  const snapshot = await stats.snapshot();
  assert.deepEqual(
    { ...snapshot.runs, latency: snapshot.runs.latency.count },
    { total: 4, ok: 2, error: 0, timeout: 1, cancelled: 1, latency: 4 },
  );
  assert.equal(snapshot.runs.latency.errors, 2);
  const { running, ...sandboxes } = snapshot.sandboxes;
  assert.deepEqual(
    { ...sandboxes, startup: sandboxes.startup.p50Ms },
    { launches: 2, launchFailures: 1, live: 1, exits: { idle: 1 }, startup: 150 },
  );
  // Each running sandbox with its isolation, for codemode://stats.
  assert.deepEqual(running.map(({ startedAt: _, ...rest }) => rest), [
    { name: "a", runtime: "podman", isolation: "gvisor" },
  ]);
  assert.equal(snapshot.malformedFrames, 1);
  assert.deepEqual([snapshot.upstream[0].starts, snapshot.upstream[0].startFailures], [1, 1]);
  assert.equal(snapshot.pid, process.pid);
});

Deno.test("changes grows with every record, so unchanged figures need no new snapshot", async () => {
  const stats = new Stats();
  const before = stats.changes;
  await stats.snapshot();
  assert.equal(stats.changes, before);
  stats.run("ok", 1);
  stats.upstreamCall("s", "t", 1, "ok");
  assert.equal(stats.changes, before + 2);
});

Deno.test("StatsPublisher writes the snapshot file whole, skips unchanged figures and removes the file on stop", async () => {
  const dir = stateDir();
  const stats = new Stats();
  const publisher = new StatsPublisher(dir, { stats, intervalMs: 60_000 });
  assert.equal(publisher.file, join(statsDir(dir), `${process.pid}.json`));
  await publisher.publish();
  const first = readFileSync(publisher.file, "utf8");
  assert.equal(JSON.parse(first).runs.total, 0);
  await publisher.publish();
  assert.equal(readFileSync(publisher.file, "utf8"), first, "unchanged figures are not rewritten");
  stats.run("ok", 5);
  await publisher.publish();
  assert.equal(JSON.parse(readFileSync(publisher.file, "utf8")).runs.total, 1);
  assert.deepEqual(readdirSync(statsDir(dir)), [`${process.pid}.json`], "no temporary file is left");
  await publisher.stop();
  assert.equal(existsSync(publisher.file), false);
});

Deno.test("readLiveSnapshots() returns the snapshots of live processes and removes those of dead ones", async () => {
  const dir = stateDir();
  const stats = new Stats();
  stats.run("ok", 1);
  const publisher = new StatsPublisher(dir, { stats });
  await publisher.publish();
  const dead = join(statsDir(dir), `${DEAD_PID}.json`);
  writeFileSync(dead, JSON.stringify({ ...(await stats.snapshot()), pid: DEAD_PID }));
  writeFileSync(join(statsDir(dir), "notes.txt"), "not a snapshot");
  const live = await readLiveSnapshots(dir);
  assert.deepEqual(live.map((s) => s.pid), [process.pid]);
  assert.equal(existsSync(dead), false);
  await publisher.stop();
  assert.deepEqual(await readLiveSnapshots(stateDir()), [], "no stats folder at all is no server");
});

Deno.test("a snapshot file being replaced while it is read is skipped, not fatal", async () => {
  const dir = stateDir();
  await mkdir(statsDir(dir), { recursive: true });
  writeFileSync(join(statsDir(dir), `${process.pid}.json`), '{"pid": ');
  assert.deepEqual(await readLiveSnapshots(dir), []);
});

Deno.test("renderStats() shows one row per process and one per upstream tool, or says none runs", async () => {
  assert.match(renderStats([]), /No codemode serve is running/);
  const stats = new Stats();
  stats.run("ok", 120);
  stats.sandboxLaunched(300);
  stats.upstreamCall("everything", "get-sum", 12, "ok");
  const snapshot = await stats.snapshot(new Date("2026-01-01T00:00:00Z"));
  const text = renderStats(
    [{ ...snapshot, startedAt: "2026-01-01T00:00:00Z" }],
    new Date("2026-01-01T00:02:05Z"),
  );
  assert.match(text, new RegExp(`│ ${process.pid} +│ 2m 5s `));
  assert.match(text, /1 live \/ 1 launched/);
  assert.match(text, /│ everything +│ get-sum +│ 1 +│ 0 +│ 0 +│ 12 ms/);
  // Sandboxes that are not plain containers are counted by isolation.
  stats.sandboxLaunched(300, true, { name: "g", runtime: "podman", isolation: "gvisor" });
  stats.sandboxLaunched(300, true, { name: "c", runtime: "podman", isolation: "container" });
  assert.match(renderStats([await stats.snapshot()]), /3 live \(gvisor 1, container 1\) \//);
});

Deno.test("approval questions are counted by how they ended, and renderStats() shows them only when there were any", async () => {
  const stats = new Stats();
  assert.doesNotMatch(renderStats([await stats.snapshot()]), /Approvals/);
  for (
    const event of ["asked", "asked", "asked", "approved", "declined", "timeout", "unavailable"] as const
  ) {
    stats.approval(event);
  }
  const snapshot = await stats.snapshot();
  assert.deepEqual(snapshot.approvals, { asked: 3, approved: 1, declined: 1, timedOut: 1, unavailable: 1 });
  assert.match(
    renderStats([snapshot, snapshot]),
    /Approvals: 6 asked, 2 approved, 2 declined, 2 timed out; 2 needed but the client could not be asked/,
  );
  // A snapshot from a serve that predates approvals has no such field.
  const { approvals: _, ...old } = snapshot;
  assert.doesNotMatch(renderStats([old as typeof snapshot]), /Approvals/);
});
