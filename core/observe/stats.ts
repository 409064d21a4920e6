/**
 * Counters and latency figures of one codemode process: runs by outcome, sandbox launches and exits by
 * reason, calls into the host by method, and calls to each upstream server and tool. Recording is cheap
 * (a few additions and one slot of a preallocated ring per call) because it sits on the proxied-call
 * path; percentiles are computed only when a snapshot is taken.
 * @module
 */

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
  };
  /** Calls the sandbox made into the host, by method (call_tool, search_tool_docs, ...). */
  rpc: ({ method: string } & SeriesSummary)[];
  upstream: ServerStats[];
  malformedFrames: number;
  approvals: ApprovalCounts;
}

/** A count of calls with their failures and a ring of recent durations. */
class Series {
  count = 0;
  errors = 0;
  #totalMs = 0;
  #maxMs = 0;
  #ring?: Float64Array;

  record(ms: number, failed: boolean): void {
    this.#ring ??= new Float64Array(SAMPLES);
    this.#ring[this.count % SAMPLES] = ms;
    this.count++;
    if (failed) this.errors++;
    this.#totalMs += ms;
    if (ms > this.#maxMs) this.#maxMs = ms;
  }

  summary(): SeriesSummary {
    const kept = this.#ring ? this.#ring.slice(0, Math.min(this.count, SAMPLES)).sort() : new Float64Array();
    const at = (p: number) => kept.length ? round(kept[Math.ceil(p * kept.length) - 1]) : 0;
    return {
      count: this.count,
      errors: this.errors,
      meanMs: this.count ? round(this.#totalMs / this.count) : 0,
      p50Ms: at(0.5),
      p95Ms: at(0.95),
      maxMs: round(this.#maxMs),
    };
  }
}

interface ServerEntry {
  all: Series;
  toolErrors: number;
  starts: number;
  startFailures: number;
  tools: Map<string, { series: Series; toolErrors: number }>;
}

/** The figures of one process; `stats` is the one every part records into. */
export class Stats {
  #startedAt = new Date();
  #changes = 0;
  #runs = { ok: 0, error: 0, timeout: 0, cancelled: 0 };
  #runLatency = new Series();
  #launches = 0;
  #launchFailures = 0;
  #startup = new Series();
  #exits = new Map<string, number>();
  #rpc = new Map<string, Series>();
  #servers = new Map<string, ServerEntry>();
  #malformed = 0;
  #approvals: ApprovalCounts = { asked: 0, approved: 0, declined: 0, timedOut: 0, unavailable: 0 };

  /** Grows with every record, so a publisher can skip writing an unchanged snapshot. */
  get changes(): number {
    return this.#changes;
  }

  /** A run ended. */
  run(outcome: RunOutcome, ms: number): void {
    this.#changes++;
    this.#runs[outcome]++;
    this.#runLatency.record(ms, outcome !== "ok");
  }

  /** A sandbox became ready (`ms` after its start) or failed to. */
  sandboxLaunched(ms: number, ok = true): void {
    this.#changes++;
    if (!ok) return void this.#launchFailures++;
    this.#launches++;
    this.#startup.record(ms, false);
  }

  /** A launched sandbox ended. */
  sandboxExited(reason: string): void {
    this.#changes++;
    this.#exits.set(reason, (this.#exits.get(reason) ?? 0) + 1);
  }

  /** The sandbox called into the host. */
  rpc(method: string, ms: number, ok: boolean): void {
    this.#changes++;
    let series = this.#rpc.get(method);
    if (!series) this.#rpc.set(method, series = new Series());
    series.record(ms, !ok);
  }

  /** An upstream server started, or failed to. */
  upstreamStart(server: string, ok: boolean): void {
    this.#changes++;
    const entry = this.#server(server);
    if (ok) entry.starts++;
    else entry.startFailures++;
  }

  /** An upstream tool call ended: "ok", "tool_error" (an `isError` result) or "error" (it threw). */
  upstreamCall(server: string, tool: string, ms: number, outcome: "ok" | "tool_error" | "error"): void {
    this.#changes++;
    const entry = this.#server(server);
    let one = entry.tools.get(tool);
    if (!one) entry.tools.set(tool, one = { series: new Series(), toolErrors: 0 });
    const failed = outcome === "error";
    entry.all.record(ms, failed);
    one.series.record(ms, failed);
    if (outcome === "tool_error") {
      entry.toolErrors++;
      one.toolErrors++;
    }
  }

  /** A frame from the sandbox was dropped as malformed or oversized. */
  malformedFrame(): void {
    this.#changes++;
    this.#malformed++;
  }

  /** An approval question was asked or ended ("declined" includes dismissed ones), or could not be asked. */
  approval(event: "asked" | "approved" | "declined" | "timeout" | "unavailable"): void {
    this.#changes++;
    this.#approvals[event === "timeout" ? "timedOut" : event]++;
  }

  /** Everything recorded so far. */
  snapshot(now = new Date()): StatsSnapshot {
    const exits = Object.fromEntries([...this.#exits].sort(([a], [b]) => a.localeCompare(b)));
    const ended = [...this.#exits.values()].reduce((a, b) => a + b, 0);
    const runs = this.#runs;
    return {
      pid: process.pid,
      startedAt: this.#startedAt.toISOString(),
      updatedAt: now.toISOString(),
      uptimeSeconds: Math.round((now.getTime() - this.#startedAt.getTime()) / 100) / 10,
      runs: {
        total: runs.ok + runs.error + runs.timeout + runs.cancelled,
        ...runs,
        latency: this.#runLatency.summary(),
      },
      sandboxes: {
        launches: this.#launches,
        launchFailures: this.#launchFailures,
        live: Math.max(0, this.#launches - ended),
        startup: this.#startup.summary(),
        exits,
      },
      rpc: [...this.#rpc].map(([method, series]) => ({ method, ...series.summary() })),
      upstream: [...this.#servers].map(([server, entry]) => ({
        server,
        ...entry.all.summary(),
        toolErrors: entry.toolErrors,
        starts: entry.starts,
        startFailures: entry.startFailures,
        tools: [...entry.tools].map(([tool, one]) => ({
          tool,
          ...one.series.summary(),
          toolErrors: one.toolErrors,
        })),
      })),
      malformedFrames: this.#malformed,
      approvals: { ...this.#approvals },
    };
  }

  #server(name: string): ServerEntry {
    let entry = this.#servers.get(name);
    if (!entry) {
      entry = { all: new Series(), toolErrors: 0, starts: 0, startFailures: 0, tools: new Map() };
      this.#servers.set(name, entry);
    }
    return entry;
  }
}

/** The process-wide figures. */
export const stats = new Stats();

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
