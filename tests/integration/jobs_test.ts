/**
 * Background jobs through a real `codemode serve` (SDK client over stdio) with server-everything
 * upstream: on podman, a job started in one run finishes while no run executes and calls an upstream tool
 * meanwhile; failures, cancels and CODEMODE_MAX_JOBS surface as documented; a session with a running job
 * is not stopped as idle, and is stopped once CODEMODE_MAX_JOB_TIME cancelled the job (which stats record).
 * On Pyodide, tasks and async jobs go on between runs in the Deno worker as well.
 */
import assert from "node:assert/strict";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { assertNoSandboxOf, runWithin, sandboxesOf, serve, type Served } from "./_serve.ts";
import type { StatsSnapshot } from "../../core/observe/stats.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The value a run returned (its `value`), failing on an error; a loaded machine may take minutes to answer. */
async function value(s: Served, code: string): Promise<string> {
  const r = await runWithin(s, code, 60, 180_000);
  assert.equal(r.isError, false, r.text);
  return String(r.structured.value ?? "");
}

async function readStats(s: Served): Promise<StatsSnapshot> {
  const read = await s.client.readResource({ uri: "codemode://stats" });
  return JSON.parse((read.contents[0] as { text: string }).text) as StatsSnapshot;
}

Deno.test({
  name:
    "podman: jobs finish between runs, call tools, fail, cancel and cap; running jobs keep a session from " +
    "idling until CODEMODE_MAX_JOB_TIME",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s = await serve({
      CODEMODE_RUNTIME: "podman",
      CODEMODE_IDLE_TIMEOUT: "4s",
      CODEMODE_MAX_JOB_TIME: "8s",
      CODEMODE_MAX_JOBS: "2",
    });
    const pid = s.transport.pid;
    try {
      // A job with a tool call ends while no run executes; the next run sees when, and what it printed.
      const started = await runWithin(
        s,
        [
          "import time",
          "from mcp import runtime",
          "marks = {}",
          "async def crawl():",
          "    got = await mcp_everything.echo(message='from a job')",
          "    print('echoed:', got)",
          "    await asyncio.sleep(0.5)",
          "    marks['done'] = time.time()",
          "    return 'crawled'",
          "job = runtime.start_job(crawl)",
          "print('run over')",
        ].join("\n"),
        60,
        180_000,
      );
      assert.equal(started.isError, false, started.text);
      assert.equal(started.structured.stdout, "run over\n", "the job's output is not the run's");
      await sleep(2500);
      const seen = await value(
        s,
        "now = time.time()\ninfo = runtime.jobs()[0]\n" +
          "(now > marks['done'], info['state'], info['tool_calls'], info['output_tail'], await runtime.wait(job))",
      );
      assert.equal(seen, "(True, 'done', 1, 'echoed: Echo: from a job\\n', 'crawled')");

      // A failing job's error surfaces at wait(); cancel works; CODEMODE_MAX_JOBS caps running jobs.
      const failing = await runWithin(
        s,
        "async def boom():\n    raise ValueError('bad input')\nbad = runtime.start_job(boom)\nawait runtime.wait(bad)",
        30,
        120_000,
      );
      assert.equal(failing.isError, true);
      assert.match(failing.text, /line 2, in boom[\s\S]*ValueError: bad input/);
      const capped = await value(
        s,
        [
          "async def forever():",
          "    while True:",
          "        await asyncio.sleep(0.2)",
          "a, b = runtime.start_job(forever), runtime.start_job(forever)",
          "try:",
          "    runtime.start_job(forever)",
          "    refused = None",
          "except RuntimeError as e:",
          "    refused = str(e)",
          "a.cancel()",
          "b.cancel()",
          "try:",
          "    await runtime.wait(a)",
          "except asyncio.CancelledError as e:",
          "    cancelled = str(e)",
          "refused, cancelled, b.state if b.done() else (await asyncio.sleep(0.1), b.state)[1]",
        ].join("\n"),
      );
      assert.match(
        capped,
        /^\('2 background jobs are running in this session, the most it may run \(CODEMODE_MAX_JOBS\)/,
      );
      assert.match(capped, /'cancelled by job\.cancel\(\)', 'cancelled'\)$/);

      // The idle rule: a running job keeps the session past CODEMODE_IDLE_TIMEOUT (4s)...
      await value(
        s,
        "async def beat():\n    while True:\n        await asyncio.sleep(0.5)\n        print('beat')\nrunner = runtime.start_job(beat)",
      );
      const jobStarted = Date.now();
      await sleep(6000);
      assert.equal((await sandboxesOf(runtime, pid)).length, 1, "a session with a running job is not idle");
      // ...until CODEMODE_MAX_JOB_TIME (8s) cancels the job; then it idles out and the cancel is recorded.
      const deadline = jobStarted + 8_000 + 4_000 + 30_000;
      while ((await sandboxesOf(runtime, pid)).length && Date.now() < deadline) await sleep(500);
      assert.deepEqual(await sandboxesOf(runtime, pid), [], "stopped as idle once its job was cancelled");
      assert.ok(
        Date.now() - jobStarted >= 11_000,
        "not before the job's time ran out and the idle timeout passed",
      );
      const stats = await readStats(s);
      assert.equal(stats.jobs.overtime, 1);
      assert.equal(stats.jobs.running, 0);
      assert.equal(stats.jobs.done, 1);
      assert.equal(stats.jobs.failed, 1);
      assert.equal(stats.jobs.cancelled, 2);
      assert.equal(stats.sandboxes.exits.idle, 1);
    } finally {
      await s.close();
    }
    await assertNoSandboxOf(runtime, pid);
  },
});

Deno.test({
  name: "pyodide: a task made without await and an async job go on between runs; a plain function is refused",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s = await serve({ CODEMODE_RUNTIME: "pyodide" });
    try {
      const made = await value(
        s,
        [
          "import time",
          "from mcp import runtime",
          "ticks = []",
          "async def tick():",
          "    for _ in range(3):",
          "        await asyncio.sleep(0.2)",
          "        ticks.append(time.time())",
          "    print('ticked')",
          "t = asyncio.create_task(tick(), name='ticker')",
          "async def slow():",
          "    await asyncio.sleep(0.5)",
          "    return 'slow done'",
          "job = runtime.start_job(slow)",
          "asyncio.get_running_loop() is not None",
        ].join("\n"),
      );
      assert.equal(made, "True");
      await sleep(1500);
      const after = await value(
        s,
        "now = time.time()\n(len(ticks), ticks[-1] < now, sorted((j['name'], j['state'], j['output_tail']) " +
          "for j in runtime.jobs()), await runtime.wait(job))",
      );
      assert.equal(after, "(3, True, [('slow', 'done', ''), ('ticker', 'done', 'ticked\\n')], 'slow done')");
      const refused = await runWithin(s, "runtime.start_job(time.sleep)", 30, 120_000);
      assert.equal(refused.isError, true);
      assert.match(refused.text, /has no threads, so a plain function cannot run in the background/);
    } finally {
      await s.close();
    }
  },
});
