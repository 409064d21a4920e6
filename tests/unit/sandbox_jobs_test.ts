/**
 * The sandbox's event loop and background jobs, with the host's own python3 (no container): cells run
 * inside the running loop, tasks and jobs go on between runs, their output stays theirs, and the caps and
 * the host's cancel hold. The test plays the host.
 */
import assert from "node:assert/strict";
import { type JobFrame, LocalPython, type RpcFrame, TEST_CONFIG, withPython } from "./_local_python.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const ended = (id: string) => (frame: JobFrame) =>
  frame.type === "job" && frame.id === id && frame.state !== "running";

Deno.test("a cell runs inside the running loop: create_task and get_running_loop work without an await", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "loop = asyncio.get_running_loop()\nt = asyncio.create_task(asyncio.sleep(0.01, result=7))\ntype(t).__name__",
    );
    assert.equal(run.done.status, "ok", run.done.error);
    assert.equal(run.done.value, "'Task'");
    assert.equal((await python.execute("await t")).done.value, "7");
    assert.equal((await python.execute("asyncio.get_running_loop() is loop")).done.value, "True");
  });
});

Deno.test("asyncio.run() and run_until_complete() at top level run in the session's loop; nested, a clear error", async () => {
  await withPython(async (python) => {
    await python.execute("async def main(x=1):\n    await asyncio.sleep(0)\n    return x * 2");
    assert.equal((await python.execute("asyncio.run(main(2))")).done.value, "4");
    const guarded = await python.execute("if __name__ == '__main__':\n    r = asyncio.run(main(5))\nr");
    assert.equal(guarded.done.value, "10");
    const loop = await python.execute("loop = asyncio.new_event_loop()\nloop.run_until_complete(main(3))");
    assert.equal(loop.done.value, "6");
    assert.equal(
      (await python.execute("asyncio.get_event_loop().run_until_complete(main(4))")).done.value,
      "8",
    );
    const nested = await python.execute("def f():\n    return asyncio.run(main())\nf()");
    assert.equal(nested.done.status, "error");
    assert.match(
      nested.done.error ?? "",
      /RuntimeError: asyncio\.run\(\) cannot be called here.*await main\(\)/s,
    );
    assert.doesNotMatch(nested.stderr, /never awaited/);
  });
});

Deno.test("a task started in one run finishes while no run executes, and its output stays out of later runs", async () => {
  await withPython(async (python) => {
    const started = await python.execute([
      "import time",
      "finished_at = None",
      "async def work():",
      "    global finished_at",
      "    for i in range(3):",
      "        await asyncio.sleep(0.2)",
      "        print('tick', i)",
      "    finished_at = time.time()",
      "    return 'done'",
      "t = asyncio.create_task(work(), name='ticker')",
    ].join("\n"));
    assert.equal(started.done.status, "ok");
    const adopted = await python.jobFrame((f) => f.type === "job" && f.name === "ticker");
    const end = await python.jobFrame(ended(adopted.id));
    assert.equal(end.type === "job" && end.state, "done");
    const next = await python.execute("time.time() - finished_at, finished_at is not None");
    assert.match(next.done.value ?? "", /^\(\d+\.\d+, True\)$/);
    assert.ok(Number(next.done.value!.slice(1).split(",")[0]) > 0, "finished before the next run started");
    assert.equal(next.stdout, "", "the task's output is not the next run's");
    const printed = python.jobFrames.filter((f) => f.type === "job_output" && f.id === adopted.id)
      .map((f) => f.type === "job_output" ? f.data : "").join("");
    assert.equal(printed, "tick 0\ntick 1\ntick 2\n");
    const jobs = await python.execute(
      "from mcp import runtime\n[(j['name'], j['state'], j['output_tail']) for j in runtime.jobs()]",
    );
    assert.equal(jobs.done.value, "[('ticker', 'done', 'tick 0\\ntick 1\\ntick 2\\n')]");
  });
});

Deno.test("start_job runs coroutines, async and plain functions; wait returns values, raises errors and cancellations", async () => {
  await withPython(async (python) => {
    const setup = await python.execute([
      "from mcp import runtime",
      "import time, threading",
      "async def slow(x):",
      "    await asyncio.sleep(0.3)",
      "    print('slow done')",
      "    return x",
      "async def fetch():",
      "    return 'fetched'",
      "def blocking():",
      "    time.sleep(0.2)",
      "    print('from a thread', threading.current_thread().name)",
      "    return 41 + 1",
      "async def broken():",
      "    await asyncio.sleep(0)",
      "    raise ValueError('no good')",
      "async def forever():",
      "    while True:",
      "        await asyncio.sleep(0.05)",
      "a = runtime.start_job(slow(5))",
      "b = runtime.start_job(fetch)",
      "c = runtime.start_job(blocking, name='thread job')",
      "d = runtime.start_job(broken)",
      "e = runtime.start_job(forever)",
      "print('started')",
      "[j.name for j in (a, b, c, d, e)]",
    ].join("\n"));
    assert.equal(setup.done.status, "ok", setup.done.error);
    assert.equal(setup.stdout, "started\n", "no job output in the run");
    assert.equal(setup.done.value, "['slow', 'fetch', 'thread job', 'broken', 'forever']");
    assert.equal(
      (await python.execute("await runtime.wait(a), await b, await runtime.wait(c)")).done.value,
      "(5, 'fetched', 42)",
    );
    const failed = await python.execute("await runtime.wait(d)");
    assert.equal(failed.done.status, "error");
    assert.match(
      failed.done.error ?? "",
      /line 15, in broken\n.*raise ValueError\('no good'\)\nValueError: no good/s,
    );
    const timedWait = await python.execute("await runtime.wait(e, timeout=0.1)");
    assert.match(
      timedWait.done.error ?? "",
      /TimeoutError: Job job-\d+ \('forever'\) is still running after 0\.1s/,
    );
    const cancelled = await python.execute("e.cancel()\nawait runtime.wait(e)");
    assert.match(cancelled.done.error ?? "", /CancelledError: cancelled by job\.cancel\(\)/);
    const early = await python.execute(
      "f = runtime.start_job(forever, name='early')\nf.cancel()\nawait runtime.wait(f)",
    );
    assert.match(
      early.done.error ?? "",
      /CancelledError: cancelled by job\.cancel\(\)/,
      "cancelled before its first step",
    );
    assert.doesNotMatch(early.stderr, /never awaited/);
    const listed = await python.execute(
      "{j['name']: (j['state'], j['output_tail'], j['error'] is None) for j in runtime.jobs()}",
    );
    assert.equal(
      listed.done.value,
      "{'slow': ('done', 'slow done\\n', True), 'fetch': ('done', '', True), 'thread job': ('done', " +
        "'from a thread codemode-job-3\\n', True), 'broken': ('failed', '', False), 'forever': " +
        "('cancelled', '', False), 'early': ('cancelled', '', False)}",
    );
    const keys = await python.execute("sorted(runtime.jobs()[0])");
    assert.equal(keys.done.value, "['error', 'id', 'name', 'output_tail', 'seconds', 'state', 'tool_calls']");
    const bad = await python.execute("runtime.start_job(42)");
    assert.match(
      bad.done.error ?? "",
      /TypeError: runtime\.start_job\(\) takes a coroutine, an async function or a function, not int/,
    );
  });
});

Deno.test("a job's tool calls name it and are answered between runs; the host's cancel stops it with its reason", async () => {
  const python = await LocalPython.ready();
  try {
    const calls: RpcFrame[] = [];
    python.background = (rpc) => {
      calls.push(rpc);
      return { value: { n: calls.length } };
    };
    const run = await python.execute([
      "from mcp import runtime",
      "async def poll():",
      "    while True:",
      "        got = await mcp_my_server.echo(message='hi')",
      "        print('got', got['n'])",
      "        await asyncio.sleep(0.05)",
      "job = runtime.start_job(poll)",
    ].join("\n"));
    assert.equal(run.done.status, "ok", run.done.error);
    assert.equal(run.rpcs.length, 0, "no call of the job is the run's");
    while (calls.length < 3) await sleep(50);
    assert.ok(calls.every((c) => c.job === "job-1" && c.method === "call_tool"));
    python.send({ type: "cancel_job", id: "job-1", reason: "ran past CODEMODE_MAX_JOB_TIME (1s)" });
    const end = await python.jobFrame(ended("job-1"));
    assert.equal(end.type === "job" && end.state, "cancelled");
    assert.equal(end.type === "job" && end.error, "ran past CODEMODE_MAX_JOB_TIME (1s)");
    assert.ok(end.type === "job" && (end.tool_calls ?? 0) >= 3);
    const info = await python.execute("runtime.jobs()[0]['state'], runtime.jobs()[0]['tool_calls'] >= 3");
    assert.equal(info.done.value, "('cancelled', True)");
  } finally {
    await python.close();
  }
});

Deno.test("CODEMODE_MAX_JOBS caps live jobs: start_job refuses, and tasks a run leaves beyond it are cancelled", async () => {
  await withPython(async (python) => {
    const run = await python.execute([
      "from mcp import runtime",
      "async def idle():",
      "    await asyncio.sleep(30)",
      "jobs = [runtime.start_job(idle) for _ in range(2)]",
      "try:",
      "    runtime.start_job(idle)",
      "except RuntimeError as e:",
      "    print(e)",
    ].join("\n"));
    assert.match(
      run.stdout,
      /^2 background jobs are running in this session, the most it may run \(CODEMODE_MAX_JOBS\)/,
    );
    const tasks = await python.execute(
      "jobs[0].cancel()\nawait asyncio.sleep(0.01)\nts = [asyncio.create_task(idle(), name=f't{i}') for i in range(3)]",
    );
    assert.equal(tasks.done.status, "ok");
    assert.equal(tasks.done.notes?.length, 1);
    assert.match(
      tasks.done.notes![0],
      /^cancelled 2 task\(s\) the run left running \(t1, t2\): 2 background jobs/,
    );
    const states = await python.execute("[(j['name'], j['state']) for j in runtime.jobs()]");
    assert.equal(states.done.value, "[('idle', 'cancelled'), ('idle', 'running'), ('t0', 'running')]");
  }, { ...TEST_CONFIG, max_jobs: 2 });
});

Deno.test("a job's displays are kept for the run that waits for it", async () => {
  await withPython(async (python) => {
    const run = await python.execute([
      "from mcp import runtime",
      "class Rich:",
      "    def _repr_markdown_(self):",
      "        return '**rich**'",
      "async def shows():",
      "    display(Rich())",
      "    return 1",
      "job = runtime.start_job(shows)",
    ].join("\n"));
    assert.equal(run.displays.length, 0);
    await python.jobFrame(ended("job-1"));
    const waited = await python.execute("await runtime.wait(job)");
    assert.equal(waited.done.value, "1");
    assert.deepEqual(waited.displays.map((d) => [d.mime, d.data]), [["text/markdown", "**rich**"]]);
    const out = python.jobFrames.filter((f) => f.type === "job_output").map((f) =>
      f.type === "job_output" && f.data
    );
    assert.deepEqual(out, ["[display text/markdown, 8 bytes: shown by `await runtime.wait(job)`]\n"]);
  });
});
