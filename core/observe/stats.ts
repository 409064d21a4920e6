/**
 * Counters and latency figures of one codemode process: runs by outcome, sandbox launches and exits by
 * reason, calls into the host by method, and calls to each upstream server and tool. Counts and sums
 * live in prom-client metrics (`metrics.ts`), which `/metrics` exposes as they are; what Prometheus has
 * no place for (percentiles and the maximum of recent calls) is kept here, in one preallocated ring per
 * series, and so is the list of running sandboxes with their isolation (at most one per live session).
 * Recording is cheap (a few additions per call) because it sits on the proxied-call path;
 * percentiles are computed only when a snapshot is taken.
 * @module
 */
import type { Isolation } from "../contracts/runtime.ts";
import { CodemodeMetrics, counterValues, histogramTotals } from "./metrics.ts";

/** Latency samples kept per series; percentiles cover the most recent ones. */
export const SAMPLES = 256;

/** Count, failures and latency of one kind of call. */
export interface SeriesSummary {
  count: number;
  errors: number;
  meanMs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

/** One upstream tool's figures; `toolErrors` counts results the server flagged `isError`. */
export interface ToolStats extends SeriesSummary {
  tool: string;
  toolErrors: number;
}

/** One upstream server's figures, all its tools together and each tool. */
export interface ServerStats extends SeriesSummary {
  server: string;
  toolErrors: number;
  /** Successful starts (the first and every restart) and failed ones. */
  starts: number;
  startFailures: number;
  tools: ToolStats[];
}

/** How runs ended. */
export type RunOutcome = "ok" | "error" | "timeout" | "cancelled";

/** Approval questions: put to a person, and how they ended; `unavailable` counts calls nobody could be asked about. */
export interface ApprovalCounts {
  asked: number;
  approved: number;
  declined: number;
  timedOut: number;
  unavailable: number;
}

/** Servers found and added from a registry: searches, adds by answer, refusals before any question. */
export interface RegistryCounts {
  finds: number;
  findErrors: number;
  /** approved, allowed (CODEMODE_ADD_SERVERS=allow), declined, timeout, unavailable, failed. */
  adds: Record<string, number>;
  /** off, policy, entry (one codemode will not run, or a bad request), secret (sandbox code passed one). */
  refused: Record<string, number>;
}

/** How an upstream tool call ended: "tool_error" is an `isError` result, "error" a call that threw. */
export type CallOutcome = "ok" | "tool_error" | "error";

/** Everything at one moment: what `codemode://stats` and `codemode stats --json` show. */
export interface StatsSnapshot {
  pid: number;
  startedAt: string;
  updatedAt: string;
  uptimeSeconds: number;
  runs: { total: number } & Record<RunOutcome, number> & { latency: SeriesSummary };
  sandboxes: {
    launches: number;
    launchFailures: number;
    /** Launched and not yet ended. */
    live: number;
    startup: SeriesSummary;
    /** Ends by reason: idle, shutdown, timeout, cancelled, crashed, channel-failure, killed. */
    exits: Record<string, number>;
    /** The sandboxes running now, each with the isolation it runs under. */
    running: RunningSandbox[];
  };
  /** Calls the sandbox made into the host, by method (call_tool, search_tool_docs, ...). */
  rpc: ({ method: string } & SeriesSummary)[];
  upstream: ServerStats[];
  malformedFrames: number;
  approvals: ApprovalCounts;
  /** Background jobs in sandboxes: started, running now, and how the others ended. */
  jobs: { started: number; running: number } & Record<JobOutcome, number>;
  /** run_python calls run as MCP tasks: working now, and how the others ended. */
  tasks: { working: number } & Record<TaskStatus, number>;
  registry: RegistryCounts;
}

/** One running sandbox: its name, runtime and isolation (container, gvisor, wasm), since when. */
export interface RunningSandbox {
  name: string;
  runtime: string;
  isolation: Isolation;
  startedAt: string;
}

/** How a background job ended; "overtime": the host cancelled it past CODEMODE_MAX_JOB_TIME. */
export type JobOutcome = "done" | "failed" | "cancelled" | "overtime";
/** How a run_python call run as an MCP task ended. */
export type TaskStatus = "completed" | "failed" | "cancelled";

/** The most recent durations of one series and the largest ever seen. */
class Recent {
  #ring = new Float64Array(SAMPLES);
  #seen = 0;
  #maxMs = 0;

  record(ms: number): void {
    this.#ring[this.#seen++ % SAMPLES] = ms;
    if (ms > this.#maxMs) this.#maxMs = ms;
  }

  /** The summary, given the count, failures and total time the metrics hold. */
  summary(count: number, errors: number, totalMs: number): SeriesSummary {
    const kept = this.#ring.slice(0, Math.min(this.#seen, SAMPLES)).sort();
    const at = (p: number) => kept.length ? round(kept[Math.ceil(p * kept.length) - 1]) : 0;
    return {
      count,
      errors,
      meanMs: count ? round(totalMs / count) : 0,
      p50Ms: at(0.5),
      p95Ms: at(0.95),
      maxMs: round(this.#maxMs),
    };
  }
}

const RUN_OUTCOMES: RunOutcome[] = ["ok", "error", "timeout", "cancelled"];
const JOB_OUTCOMES: JobOutcome[] = ["done", "failed", "cancelled", "overtime"];
const TASK_STATUSES: TaskStatus[] = ["completed", "failed", "cancelled"];
const label = (name: string) => (labels: Record<string, string | number>) => String(labels[name] ?? "");
const serverTool = (labels: Record<string, string | number>) => `${labels.server}\u0000${labels.tool}`;

/** The figures of one process; `stats` is the one every part records into. */
export class Stats {
  /** The Prometheus metrics these figures are kept in. */
  readonly metrics: CodemodeMetrics;
  #startedAt = new Date();
  #changes = 0;
  #runs = new Recent();
  #startup = new Recent();
  #rpc = new Map<string, Recent>();
  /** Per server: all its calls, and each tool's; in first-call order. */
  #servers = new Map<string, { all: Recent; tools: Map<string, Recent> }>();
  /** Servers that started once, so a later start counts as a restart. */
  #started = new Set<string>();
  /** The sandboxes running now, by name. */
  #running = new Map<string, RunningSandbox>();

  /** Figures recorded into `metrics` (a fresh registry by default). */
  constructor(metrics = new CodemodeMetrics()) {
    this.metrics = metrics;
  }

  /** Grows with every record, so a publisher can skip writing an unchanged snapshot. */
  get changes(): number {
    return this.#changes;
  }

  /** A run ended. */
  run(outcome: RunOutcome, ms: number): void {
    this.#changes++;
    this.metrics.runs.inc({ outcome });
    this.metrics.runDuration.observe(ms / 1000);
    this.#runs.record(ms);
  }

  /** A sandbox became ready (`ms` after its start) or failed to; `sandbox` says which, and how isolated. */
  sandboxLaunched(ms: number, ok = true, sandbox?: Omit<RunningSandbox, "startedAt">): void {
    this.#changes++;
    if (!ok) return this.metrics.sandboxStartFailures.inc();
    if (sandbox) this.#running.set(sandbox.name, { ...sandbox, startedAt: new Date().toISOString() });
    this.metrics.sandboxesStarted.inc();
    this.metrics.sandboxes.inc();
    this.metrics.sandboxStartDuration.observe(ms / 1000);
    this.#startup.record(ms);
  }

  /** A launched sandbox ended. */
  sandboxExited(reason: string, name?: string): void {
    this.#changes++;
    if (name) this.#running.delete(name);
    this.metrics.sandboxExits.inc({ reason });
    this.metrics.sandboxes.dec();
  }

  /** The sandbox called into the host. */
  rpc(method: string, ms: number, ok: boolean): void {
    this.#changes++;
    this.metrics.hostCalls.inc({ method, outcome: ok ? "ok" : "error" });
    this.metrics.hostCallDuration.observe({ method }, ms / 1000);
    let recent = this.#rpc.get(method);
    if (!recent) this.#rpc.set(method, recent = new Recent());
    recent.record(ms);
  }

  /** An upstream server started, or failed to. */
  upstreamStart(server: string, ok: boolean): void {
    this.#changes++;
    this.#server(server);
    this.metrics.upstreamStarts.inc({ server, outcome: ok ? "ok" : "failed" });
    if (!ok) return;
    if (this.#started.has(server)) this.metrics.upstreamRestarts.inc({ server });
    this.#started.add(server);
  }

  /** An upstream tool call ended. */
  upstreamCall(server: string, tool: string, ms: number, outcome: CallOutcome): void {
    this.#changes++;
    this.metrics.toolCalls.inc({ server, tool, outcome });
    this.metrics.toolCallDuration.observe({ server, tool }, ms / 1000);
    const entry = this.#server(server);
    let recent = entry.tools.get(tool);
    if (!recent) entry.tools.set(tool, recent = new Recent());
    entry.all.record(ms);
    recent.record(ms);
  }

  /** A frame from the sandbox was dropped as malformed or oversized. */
  malformedFrame(): void {
    this.#changes++;
    this.metrics.malformedFrames.inc();
  }

  /** An approval question was asked or ended ("declined" includes dismissed ones), or could not be asked. */
  approval(event: "asked" | "approved" | "declined" | "timeout" | "unavailable"): void {
    this.#changes++;
    if (event === "asked") this.metrics.approvalQuestions.inc();
    else this.metrics.approvals.inc({ answer: event });
  }

  /** A background job started in a sandbox. */
  jobStarted(): void {
    this.#changes++;
    this.metrics.jobsStarted.inc();
    this.metrics.jobs.inc();
  }

  /** A background job ended. */
  jobEnded(outcome: JobOutcome): void {
    this.#changes++;
    this.metrics.jobsEnded.inc({ outcome });
    this.metrics.jobs.dec();
  }

  /** A run_python call started as an MCP task, or ended (`status` given). */
  task(status?: TaskStatus): void {
    this.#changes++;
    if (!status) return this.metrics.tasks.inc();
    this.metrics.tasksEnded.inc({ status });
    this.metrics.tasks.dec();
  }

  /** Sandbox code searched the registry. */
  registryFind(ok: boolean): void {
    this.#changes++;
    this.metrics.registryFinds.inc({ outcome: ok ? "ok" : "error" });
  }

  /** An add reached its answer (or failed to start after it), or was refused before any question. */
  serverAdd(event: { answer: string } | { refused: "off" | "policy" | "entry" | "secret" }): void {
    this.#changes++;
    if ("answer" in event) this.metrics.serverAdds.inc({ answer: event.answer });
    else this.metrics.serverAddRefusals.inc({ reason: event.refused });
  }

  /** Everything recorded so far. */
  async snapshot(now = new Date()): Promise<StatsSnapshot> {
    const m = this.metrics;
    const [runs, runTime, launches, failures, startTime, live, exits, rpcCalls, rpcTime] = await Promise.all([
      counterValues(m.runs, label("outcome")),
      histogramTotals(m.runDuration, () => ""),
      counterValues(m.sandboxesStarted),
      counterValues(m.sandboxStartFailures),
      histogramTotals(m.sandboxStartDuration, () => ""),
      counterValues(m.sandboxes),
      counterValues(m.sandboxExits, label("reason")),
      counterValues(m.hostCalls, (l) => `${l.method}\u0000${l.outcome}`),
      histogramTotals(m.hostCallDuration, label("method")),
    ]);
    const [calls, callTime, starts, malformed, approvals, asked, finds, adds, refused] = await Promise.all([
      counterValues(m.toolCalls, (l) => `${serverTool(l)}\u0000${l.outcome}`),
      histogramTotals(m.toolCallDuration, serverTool),
      counterValues(m.upstreamStarts, (l) => `${l.server}\u0000${l.outcome}`),
      counterValues(m.malformedFrames),
      counterValues(m.approvals, label("answer")),
      counterValues(m.approvalQuestions),
      counterValues(m.registryFinds, label("outcome")),
      counterValues(m.serverAdds, label("answer")),
      counterValues(m.serverAddRefusals, label("reason")),
    ]);
    const [jobsStarted, jobsRunning, jobsEnded, tasksWorking, tasksEnded] = await Promise.all([
      counterValues(m.jobsStarted),
      counterValues(m.jobs),
      counterValues(m.jobsEnded, label("outcome")),
      counterValues(m.tasks),
      counterValues(m.tasksEnded, label("status")),
    ]);
    const byOutcome = Object.fromEntries(RUN_OUTCOMES.map((o) => [o, runs.get(o) ?? 0])) as Record<
      RunOutcome,
      number
    >;
    const total = RUN_OUTCOMES.reduce((n, o) => n + byOutcome[o], 0);
    const runTotals = runTime.get("") ?? { count: 0, sum: 0 };
    const startTotals = startTime.get("") ?? { count: 0, sum: 0 };
    const toolFigures = (server: string, tool: string, recent: Recent): ToolStats => {
      const key = `${server}\u0000${tool}`;
      const time = callTime.get(key) ?? { count: 0, sum: 0 };
      return {
        tool,
        ...recent.summary(time.count, calls.get(`${key}\u0000error`) ?? 0, time.sum * 1000),
        toolErrors: calls.get(`${key}\u0000tool_error`) ?? 0,
      };
    };
    return {
      pid: process.pid,
      startedAt: this.#startedAt.toISOString(),
      updatedAt: now.toISOString(),
      uptimeSeconds: Math.round((now.getTime() - this.#startedAt.getTime()) / 100) / 10,
      runs: {
        total,
        ...byOutcome,
        latency: this.#runs.summary(runTotals.count, total - byOutcome.ok, runTotals.sum * 1000),
      },
      sandboxes: {
        launches: launches.get("") ?? 0,
        launchFailures: failures.get("") ?? 0,
        live: Math.max(0, live.get("") ?? 0),
        startup: this.#startup.summary(startTotals.count, 0, startTotals.sum * 1000),
        exits: Object.fromEntries([...exits].sort(([a], [b]) => a.localeCompare(b))),
        running: [...this.#running.values()],
      },
      rpc: [...this.#rpc].map(([method, recent]) => {
        const time = rpcTime.get(method) ?? { count: 0, sum: 0 };
        return {
          method,
          ...recent.summary(time.count, rpcCalls.get(`${method}\u0000error`) ?? 0, time.sum * 1000),
        };
      }),
      upstream: [...this.#servers].map(([server, entry]) => {
        const tools = [...entry.tools].map(([tool, recent]) => toolFigures(server, tool, recent));
        const times = [...entry.tools.keys()].map((tool) => callTime.get(`${server}\u0000${tool}`));
        const count = times.reduce((n, t) => n + (t?.count ?? 0), 0);
        const totalMs = times.reduce((n, t) => n + (t?.sum ?? 0), 0) * 1000;
        return {
          server,
          ...entry.all.summary(count, tools.reduce((n, t) => n + t.errors, 0), totalMs),
          toolErrors: tools.reduce((n, t) => n + t.toolErrors, 0),
          starts: starts.get(`${server}\u0000ok`) ?? 0,
          startFailures: starts.get(`${server}\u0000failed`) ?? 0,
          tools,
        };
      }),
      malformedFrames: malformed.get("") ?? 0,
      approvals: {
        asked: asked.get("") ?? 0,
        approved: approvals.get("approved") ?? 0,
        declined: approvals.get("declined") ?? 0,
        timedOut: approvals.get("timeout") ?? 0,
        unavailable: approvals.get("unavailable") ?? 0,
      },
      jobs: {
        started: jobsStarted.get("") ?? 0,
        running: Math.max(0, jobsRunning.get("") ?? 0),
        ...Object.fromEntries(JOB_OUTCOMES.map((o) => [o, jobsEnded.get(o) ?? 0])) as Record<
          JobOutcome,
          number
        >,
      },
      tasks: {
        working: Math.max(0, tasksWorking.get("") ?? 0),
        ...Object.fromEntries(TASK_STATUSES.map((s) => [s, tasksEnded.get(s) ?? 0])) as Record<
          TaskStatus,
          number
        >,
      },
      registry: {
        finds: (finds.get("ok") ?? 0) + (finds.get("error") ?? 0),
        findErrors: finds.get("error") ?? 0,
        adds: Object.fromEntries([...adds].sort(([a], [b]) => a.localeCompare(b))),
        refused: Object.fromEntries([...refused].sort(([a], [b]) => a.localeCompare(b))),
      },
    };
  }

  #server(name: string): { all: Recent; tools: Map<string, Recent> } {
    let entry = this.#servers.get(name);
    if (!entry) this.#servers.set(name, entry = { all: new Recent(), tools: new Map() });
    return entry;
  }
}

/** The process-wide figures. */
export const stats = new Stats();

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
