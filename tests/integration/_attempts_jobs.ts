/**
 * Background-job attempts of the adversarial suite: work that outlives its run must stay inside the
 * sandbox's caps and die with its session. A job that forks (from a thread, and from the event loop,
 * whose child must not answer the host), a job that floods output, and a job that keeps calling tools
 * while its HTTP session is ended under it.
 * @module
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";
import { type Attempt, facts } from "./_adversarial.ts";
import { fakeHome } from "./_serve.ts";
import { connectHttp, eventually, startHttpServe } from "./_serve_http.ts";
import { LABELS } from "../../core/sandbox/session_manager.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Names of `engine`'s containers (running or not) whose `label` has `value`. */
function labelled(engine: string, label: string, value: string | number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(
      engine,
      ["ps", "-a", "--filter", `label=${label}=${value}`, "--format", "{{.Names}}"],
      (error, out) => error ? reject(error) : resolve(out.split("\n").map((s) => s.trim()).filter(Boolean)),
    );
  });
}

/** Background jobs: forks, floods and calls after the session ended are contained. */
export const jobs: Attempt[] = [
  {
    area: "jobs",
    name: "a job that fork-bombs from its thread stops at the process cap",
    timeout: 60,
    fresh: true,
    code: `
from mcp import runtime
def bomb():
    forked = 0
    while forked < 5000:
        try:
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
            forked += 1
        except OSError:
            break
    return forked
job = runtime.start_job(bomb)
report(forked=await runtime.wait(job, timeout=45))`,
    check(answer) {
      const forked = Number(facts(answer).forked);
      // CODEMODE_PIDS (128 by default) caps every process and thread of the sandbox.
      assert.ok(forked < 128, `${forked} processes forked`);
    },
  },
  {
    area: "jobs",
    name: "a job's child forked from the event loop never answers the host in its parent's place",
    timeout: 30,
    fresh: true,
    async steps(ctx) {
      const forked = await ctx.run(`
from mcp import runtime
async def split():
    pid = os.fork()
    await asyncio.sleep(0.5)  # the child, back in its copy of the loop, must stop there
    return pid
job = runtime.start_job(split)
report(parent=await runtime.wait(job, timeout=20) > 0)`);
      assert.equal(facts(forked).parent, true);
      for (let i = 0; i < 3; i++) {
        const again = await ctx.run("print('once')", 20);
        assert.equal(again.structured.stdout, "once\n", "one answer per run, from the parent");
      }
    },
  },
  {
    area: "jobs",
    name: "a job that floods output is capped in the sandbox and never reaches a run's output",
    timeout: 120,
    code: `
from mcp import runtime
async def flood():
    line = "x" * 999
    for i in range(20_000):
        print(line)
        if i % 1000 == 0:
            await asyncio.sleep(0)
job = runtime.start_job(flood)
await runtime.wait(job, timeout=100)
info = [j for j in runtime.jobs() if j["id"] == job.id][0]
report(tail=len(info["output_tail"]), kept=len(job.output), dropped=job.dropped)`,
    check(answer) {
      const f = facts(answer);
      assert.ok(Number(f.tail) <= 2048, `tail of ${f.tail}`);
      assert.equal(Number(f.kept), 64 * 1024, "job.output keeps the latest 64 KiB");
      // 20 million characters printed; the first MiB went to the host, the rest was only counted.
      assert.equal(Number(f.dropped), 20_000_000 - 1024 * 1024);
      assert.doesNotMatch(String(answer.structured.stdout), /xxxx/, "the job's output is not the run's");
    },
  },
  {
    area: "jobs",
    name: "a job that keeps calling tools stops when its session is ended, and leaves no container",
    async steps(ctx) {
      const home = fakeHome();
      const memory = join(home, "memory.jsonl");
      const serve = await startHttpServe(home, { CODEMODE_RUNTIME: ctx.engine, CODEMODE_LOG_LEVEL: "warn" });
      try {
        const c = await connectHttp(serve.url);
        const started = await c.run(`
from mcp import runtime
async def hammer():
    i = 0
    while True:
        i += 1
        await mcp_memory.create_entities(entities=[{"name": f"e{i}", "entityType": "t", "observations": []}])
        await asyncio.sleep(0.05)
job = runtime.start_job(hammer)`);
        assert.equal(started.isError, false, started.text);
        const size = () => statSync(memory, { throwIfNoEntry: false })?.size ?? 0;
        assert.ok(await eventually(() => Promise.resolve(size() > 500)), "the job calls the upstream server");
        const session = c.sessionId();
        await c.end(); // DELETE: the session ends while its job is calling
        assert.ok(
          await eventually(
            async () => (await labelled(ctx.engine, LABELS.session, session)).length === 0,
            30_000,
          ),
          "the session's container is removed",
        );
        const after = size();
        await sleep(2000);
        assert.equal(size(), after, "no call of the job reached the server after its session ended");
        const other = await connectHttp(serve.url);
        assert.equal((await other.run("1 + 1")).value, "2", "the server serves other sessions");
        await other.end();
      } finally {
        await serve.stop();
      }
      assert.deepEqual(await labelled(ctx.engine, LABELS.owner, serve.pid), []);
    },
  },
];
