/**
 * Section "jobs" (issue 30): what the always-running event loop costs. Two podman sandboxes run side by
 * side from the same host code: one with the sandbox runtime from before the loop ran for good (the
 * parent of the commit that made every run a loop task, read from git), one with the current runtime.
 * Warm `print(1)` round trips (host to sandbox and back, p50/p95) alternate between them in blocks; then
 * all sit idle for 60 s, with a third current sandbox running one sleeping job, while the host reads each
 * sandbox process's CPU time from /proc (all its threads).
 * @module
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { podman } from "../plugins/runtime/podman.ts";
import { SandboxSession } from "../core/sandbox/session.ts";
import { ownerLabels } from "../core/sandbox/session_manager.ts";
import type { HostFrame } from "../core/sandbox/protocol.ts";
import { bootstrapCommand, bootstrapFrame, MAIN_MODULE, PACKAGES } from "../sandbox/source.ts";
import {
  exec,
  IMAGE,
  percentile,
  removeLeftovers,
  ROOT,
  row,
  type SectionResult,
  sleep,
  trackServe,
  works,
} from "./bench_harness.ts";

/** Counts of the jobs section. */
export const counts = { warm: 300, block: 25, warmup: 20, idleSeconds: 60 };

const CONFIG = { max_output: 1024 * 1024, servers: [] };
const NO_CALLS = () => Promise.reject(new Error("no host calls in this benchmark"));

/**
 * The runtime to compare against: CODEMODE_BENCH_JOBS_BASELINE (a git revision, e.g. the main the loop
 * was merged into, so other changes to the runtime count on both sides), else the parent of the commit
 * that made every run a loop task.
 */
function baselineRevision(): string | undefined {
  try {
    const asked = process.env.CODEMODE_BENCH_JOBS_BASELINE;
    if (asked) return execFileSync("git", ["rev-parse", asked], { cwd: ROOT, encoding: "utf8" }).trim();
    const first = execFileSync(
      "git",
      ["log", "--format=%H", "--reverse", "--grep=every run is a task of the session's event loop", "-i"],
      { cwd: ROOT, encoding: "utf8" },
    ).split("\n").find(Boolean);
    return first
      ? execFileSync("git", ["rev-parse", `${first}^`], { cwd: ROOT, encoding: "utf8" }).trim()
      : undefined;
  } catch {
    return undefined;
  }
}

/** The bootstrap of the sandbox runtime at `rev` (its modules read from git), with the same config. */
function bootstrapAt(rev: string): { frame: HostFrame; source: string } {
  const git = (...args: string[]) =>
    execFileSync("git", args, { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 26 });
  const modules: Record<string, string> = {};
  for (
    const path of git("ls-tree", "-r", "--name-only", rev, "sandbox/codemode_runtime", "sandbox/mcp").split(
      "\n",
    )
  ) {
    if (!path.endsWith(".py")) continue;
    const name = path.slice("sandbox/".length, -".py".length).replaceAll("/", ".").replace(/\.__init__$/, "");
    modules[name] = git("show", `${rev}:${path}`);
  }
  return {
    frame: { type: "bootstrap", modules, packages: [...PACKAGES], main: MAIN_MODULE, config: CONFIG },
    source: git("show", `${rev}:sandbox/bootstrap.py`),
  };
}

/** A podman sandbox session from a bootstrap frame and source. */
async function sandbox(label: string, frame: HostFrame, source: string): Promise<SandboxSession> {
  const session = new SandboxSession({
    runtime: podman(),
    sandbox: {
      name: `codemode-bench-jobs-${label}-${process.pid}`,
      image: IMAGE,
      command: ["python3", "-I", "-c", source],
      limits: { memory: "512m", pids: 128 },
      labels: { ...ownerLabels(`bench-jobs-${label}`), "codemode.bench": "true" },
    },
    bootstrap: frame,
    rpc: NO_CALLS,
    maxOutput: 1024 * 1024,
  });
  await session.start();
  return session;
}

/** The container's processes: its init (`pid`) and every process below it. */
function processTree(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      parents.set(
        Number(entry),
        Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1].split(" ")[1]),
      );
    } catch { /* ended meanwhile */ }
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  }
  return tree;
}

/** CPU milliseconds the processes have used so far: every thread's time on CPU, from schedstat. */
function cpuMs(pids: number[]): number {
  let ns = 0;
  for (const pid of pids) {
    try {
      for (const task of readdirSync(`/proc/${pid}/task`)) {
        ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0]);
      }
    } catch { /* ended meanwhile */ }
  }
  return ns / 1e6;
}

async function processOf(name: string): Promise<number> {
  const r = await exec("podman", ["inspect", "--format", "{{.State.Pid}}", name]);
  return Number(r.stdout.trim());
}

/** Runs the jobs section. */
export async function benchJobs(): Promise<SectionResult> {
  const result: SectionResult = { name: "jobs", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const rev = baselineRevision();
  if (!rev) {
    result.skipped = "no git history: the runtime from before the always-running loop cannot be read";
    return result;
  }
  const before = bootstrapAt(rev);
  trackServe(process.pid); // the sandboxes below are this process's, for removeLeftovers()
  const sessions: SandboxSession[] = [];
  try {
    const old = await sandbox("before", before.frame, before.source);
    sessions.push(old);
    const now = await sandbox("loop", bootstrapFrame(CONFIG), bootstrapCommand()[3]);
    sessions.push(now);
    const withJob = await sandbox("job", bootstrapFrame(CONFIG), bootstrapCommand()[3]);
    sessions.push(withJob);
    const print1 = async (s: SandboxSession) => {
      const started = performance.now();
      const r = await s.execute("print(1)", { timeout: 30 });
      if (r.stdout !== "1\n") throw new Error(`print(1) answered ${JSON.stringify(r)}`);
      return performance.now() - started;
    };
    for (let i = 0; i < counts.warmup; i++) await print1(old), await print1(now);
    const times = { before: [] as number[], loop: [] as number[] };
    for (let done = 0; done < counts.warm; done += counts.block) {
      for (const [kind, s] of [["before", old], ["loop", now]] as const) {
        for (let i = 0; i < counts.block; i++) times[kind].push(await print1(s));
      }
    }
    for (const p of [0.5, 0.95]) {
      result.rows.push(row({
        section: "jobs",
        metric: `warm print(1) p${p * 100}, always-running loop`,
        value: percentile(times.loop, p),
        unit: "ms",
        baseline: { label: "runtime before", value: percentile(times.before, p) },
        goal: { on: "ratio", op: "≤", limit: 1.1 },
      }));
    }

    // Idle: no run, no job (and one current sandbox with one job asleep between ticks), 60 s.
    await withJob.execute(
      "from mcp import runtime\nasync def tick():\n    while True:\n        await asyncio.sleep(1)\njob = runtime.start_job(tick)",
      { timeout: 30 },
    );
    await sleep(2000);
    const trees = (await Promise.all(sessions.map((s) => processOf(s.name)))).map(processTree);
    const start = trees.map(cpuMs);
    await sleep(counts.idleSeconds * 1000);
    const used = trees.map((tree, i) => (cpuMs(tree) - start[i]) * 20 / counts.idleSeconds);
    result.notes.push(`processes measured per sandbox: ${trees.map((t) => t.length).join(", ")}`);
    result.rows.push(row({
      section: "jobs",
      metric: `idle sandbox CPU per 20 s, always-running loop (over ${counts.idleSeconds} s)`,
      value: used[1],
      unit: "ms",
      baseline: { label: "runtime before", value: used[0] },
      goal: { on: "value", op: "<", limit: 100 },
    }));
    result.rows.push(row({
      section: "jobs",
      metric: `idle sandbox CPU per 20 s with one job waking once a second (over ${counts.idleSeconds} s)`,
      value: used[2],
      unit: "ms",
      baseline: { label: "runtime before, no job", value: used[0] },
    }));
    result.notes.push(
      `baseline: the sandbox runtime at ${rev.slice(0, 10)} (before the loop ran between runs), same host ` +
        `code; ${counts.warm} print(1) per sandbox in alternating blocks of ${counts.block}; CPU from ` +
        "/proc/<pid>/task/*/schedstat (time on CPU of every thread of every process in the container)",
    );
  } finally {
    await Promise.allSettled(sessions.map((s) => s.close()));
    await removeLeftovers();
  }
  return result;
}
