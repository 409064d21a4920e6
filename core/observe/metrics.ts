/**
 * codemode's Prometheus metrics, kept by prom-client: the counters and histograms every part records
 * into (through `Stats`), in one registry per process. `/metrics` renders the registry (plus prom-client's
 * default process metrics when a server asks for them); `codemode stats` and `codemode://stats` read the
 * same counters, so each count is kept once.
 * @module
 */
import type * as Prom from "prom-client";
// The metric classes by their own files: the package's index also loads the default process metrics,
// the push gateway and the cluster aggregator (OpenTelemetry, http, zlib, cluster), which cost every
// command that records a figure several times the start-up of these four. The lib/ files have no type
// declarations of their own; they are the classes the index declares, so they take its types.
import CounterClass from "prom-client/lib/counter.js";
import GaugeClass from "prom-client/lib/gauge.js";
import HistogramClass from "prom-client/lib/histogram.js";
import RegistryClass from "prom-client/lib/registry.js";

const Counter = CounterClass as unknown as typeof Prom.Counter;
const Gauge = GaugeClass as unknown as typeof Prom.Gauge;
const Histogram = HistogramClass as unknown as typeof Prom.Histogram;
const Registry = RegistryClass as unknown as typeof Prom.Registry;
type Counter<T extends string = string> = Prom.Counter<T>;
type Gauge<T extends string = string> = Prom.Gauge<T>;
type Histogram<T extends string = string> = Prom.Histogram<T>;
type MetricObjectWithValues<T extends Prom.MetricValue<string>> = Prom.MetricObjectWithValues<T>;
type MetricValue<T extends string> = Prom.MetricValue<T>;

/** Bucket bounds (seconds) of run durations: a warm run takes milliseconds, the longest timeout minutes. */
const RUN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Bucket bounds (seconds) of calls: a proxied call takes under a millisecond, a slow tool a minute. */
const CALL_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The prefix every codemode metric name has (prom-client's default metrics do not). */
export const METRIC_PREFIX = "codemode_";

/** The metrics of one process, in their own registry. */
export class CodemodeMetrics {
  /** Every metric below; `enableProcessMetrics()` adds prom-client's default ones. */
  readonly registry: Prom.Registry = new Registry();
  readonly runs: Counter<"outcome">;
  readonly runDuration: Histogram;
  readonly toolCalls: Counter<"server" | "tool" | "outcome">;
  readonly toolCallDuration: Histogram<"server" | "tool">;
  readonly sandboxes: Gauge;
  readonly sandboxesStarted: Counter;
  readonly sandboxStartFailures: Counter;
  readonly sandboxStartDuration: Histogram;
  readonly sandboxExits: Counter<"reason">;
  readonly upstreamStarts: Counter<"server" | "outcome">;
  readonly upstreamRestarts: Counter<"server">;
  readonly approvals: Counter<"answer">;
  readonly approvalQuestions: Counter;
  readonly registryFinds: Counter<"outcome">;
  readonly serverAdds: Counter<"answer">;
  readonly serverAddRefusals: Counter<"reason">;
  readonly hostCalls: Counter<"method" | "outcome">;
  readonly hostCallDuration: Histogram<"method">;
  readonly malformedFrames: Counter;
  readonly jobs: Gauge;
  readonly jobsStarted: Counter;
  readonly jobsEnded: Counter<"outcome">;
  readonly tasks: Gauge;
  readonly tasksEnded: Counter<"status">;
  #processMetrics?: Promise<void>;

  constructor() {
    const registers = [this.registry];
    this.runs = new Counter({
      name: "codemode_runs_total",
      help: "run_python runs that ended, by outcome (ok, error, timeout, cancelled)",
      labelNames: ["outcome"],
      registers,
    });
    this.runDuration = new Histogram({
      name: "codemode_run_duration_seconds",
      help: "Wall-clock time of run_python runs, waiting for a run slot included",
      buckets: RUN_BUCKETS,
      registers,
    });
    this.toolCalls = new Counter({
      name: "codemode_tool_calls_total",
      help:
        "Calls to upstream MCP tools, by outcome (ok; tool_error: the result had isError; error: it failed)",
      labelNames: ["server", "tool", "outcome"],
      registers,
    });
    this.toolCallDuration = new Histogram({
      name: "codemode_tool_call_duration_seconds",
      help: "Time of upstream MCP tool calls, a server start included when the call caused one",
      labelNames: ["server", "tool"],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.sandboxes = new Gauge({ name: "codemode_sandboxes", help: "Sandboxes running now", registers });
    this.sandboxesStarted = new Counter({
      name: "codemode_sandboxes_started_total",
      help: "Sandboxes that started and became ready",
      registers,
    });
    this.sandboxStartFailures = new Counter({
      name: "codemode_sandbox_start_failures_total",
      help: "Sandboxes that failed to start",
      registers,
    });
    this.sandboxStartDuration = new Histogram({
      name: "codemode_sandbox_start_duration_seconds",
      help: "Time from starting a sandbox to its runtime saying it is ready",
      buckets: RUN_BUCKETS,
      registers,
    });
    this.sandboxExits = new Counter({
      name: "codemode_sandbox_exits_total",
      help: "Sandboxes that ended, by reason (idle, shutdown, timeout, cancelled, crashed, client-gone, ...)",
      labelNames: ["reason"],
      registers,
    });
    this.upstreamStarts = new Counter({
      name: "codemode_upstream_starts_total",
      help: "Starts of upstream MCP servers, by outcome (ok, failed)",
      labelNames: ["server", "outcome"],
      registers,
    });
    this.upstreamRestarts = new Counter({
      name: "codemode_upstream_restarts_total",
      help: "Successful starts of an upstream MCP server after its first one",
      labelNames: ["server"],
      registers,
    });
    this.approvals = new Counter({
      name: "codemode_approvals_total",
      help:
        "How approval questions ended, by answer (approved, declined, timeout), and calls that needed one " +
        "when nobody could be asked (unavailable)",
      labelNames: ["answer"],
      registers,
    });
    this.approvalQuestions = new Counter({
      name: "codemode_approval_questions_total",
      help: "Approval questions put to a person",
      registers,
    });
    this.registryFinds = new Counter({
      name: "codemode_registry_finds_total",
      help: "Registry searches sandbox code made (runtime.find_servers), by outcome (ok, error)",
      labelNames: ["outcome"],
      registers,
    });
    this.serverAdds = new Counter({
      name: "codemode_server_adds_total",
      help:
        "Servers sandbox code asked to add that got as far as the user (or CODEMODE_ADD_SERVERS=allow), " +
        "by answer: approved, allowed (no question), declined, timeout, unavailable, failed (did not start)",
      labelNames: ["answer"],
      registers,
    });
    this.serverAddRefusals = new Counter({
      name: "codemode_server_add_refusals_total",
      help: "Adds refused before any question, by reason: off (adding is off), policy (a rule refused it), " +
        "entry (an entry codemode will not run, or a bad request), secret (sandbox code passed a secret's value)",
      labelNames: ["reason"],
      registers,
    });
    this.hostCalls = new Counter({
      name: "codemode_host_calls_total",
      help: "Calls sandbox code made into the host, by method and outcome (ok, error)",
      labelNames: ["method", "outcome"],
      registers,
    });
    this.hostCallDuration = new Histogram({
      name: "codemode_host_call_duration_seconds",
      help: "Time the host took to serve a call from sandbox code",
      labelNames: ["method"],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.malformedFrames = new Counter({
      name: "codemode_malformed_frames_total",
      help: "Frames from sandboxes dropped as malformed or oversized",
      registers,
    });
    this.jobs = new Gauge({
      name: "codemode_jobs",
      help: "Background jobs running in sandboxes now (runtime.start_job, and tasks a run left running)",
      registers,
    });
    this.jobsStarted = new Counter({
      name: "codemode_jobs_started_total",
      help: "Background jobs started in sandboxes",
      registers,
    });
    this.jobsEnded = new Counter({
      name: "codemode_jobs_total",
      help:
        "Background jobs that ended, by outcome (done, failed, cancelled, overtime: cancelled by the host " +
        "past CODEMODE_MAX_JOB_TIME)",
      labelNames: ["outcome"],
      registers,
    });
    this.tasks = new Gauge({
      name: "codemode_tasks",
      help: "run_python calls running as MCP tasks now",
      registers,
    });
    this.tasksEnded = new Counter({
      name: "codemode_tasks_total",
      help: "run_python calls run as MCP tasks that ended, by status (completed, failed, cancelled)",
      labelNames: ["status"],
      registers,
    });
  }

  /**
   * Names this process's fleet node: `codemode_node_info{node}` is always 1 (join it to other series by
   * instance), `codemode_node_ready{node}` is 1 while the node takes new sessions. Once per process.
   */
  describeNode(node: string, ready: () => boolean): void {
    if (this.registry.getSingleMetric("codemode_node_info")) return;
    const registers = [this.registry];
    new Gauge({
      name: "codemode_node_info",
      help: "This serve --http node's id (CODEMODE_NODE_ID) as a label; always 1",
      labelNames: ["node"],
      registers,
    }).set({ node }, 1);
    new Gauge({
      name: "codemode_node_ready",
      help: "1 while this node takes new sessions (/readyz answers 200), 0 while it drains or is full",
      labelNames: ["node"],
      registers,
      collect() {
        this.set({ node }, ready() ? 1 : 0);
      },
    });
  }

  /** Adds prom-client's default process metrics (CPU, memory, handles, event loop) to the registry, once. */
  enableProcessMetrics(): Promise<void> {
    this.#processMetrics ??= import("prom-client").then(({ collectDefaultMetrics }) =>
      collectDefaultMetrics({ register: this.registry })
    );
    return this.#processMetrics;
  }

  /** The Prometheus text exposition of every metric in the registry. */
  async text(): Promise<string> {
    await this.#processMetrics;
    return await this.registry.metrics();
  }

  /** The codemode metrics alone (no process metrics) as JSON, for another process to aggregate. */
  async codemodeJson(): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
    const all = await this.registry.getMetricsAsJSON();
    return all.filter((m) => m.name.startsWith(METRIC_PREFIX)) as MetricObjectWithValues<
      MetricValue<string>
    >[];
  }
}

/** The content type of the Prometheus text format prom-client writes. */
export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/** The count and sum of a histogram per label set (keyed by `key(labels)`). */
export async function histogramTotals(
  histogram: Histogram<string>,
  key: (labels: Record<string, string | number>) => string,
): Promise<Map<string, { count: number; sum: number }>> {
  const totals = new Map<string, { count: number; sum: number }>();
  for (const v of (await histogram.get()).values) {
    const name = (v as { metricName?: string }).metricName ?? "";
    if (!name.endsWith("_count") && !name.endsWith("_sum")) continue;
    const k = key(v.labels as Record<string, string | number>);
    const entry = totals.get(k) ?? { count: 0, sum: 0 };
    if (name.endsWith("_count")) entry.count += v.value;
    else entry.sum += v.value;
    totals.set(k, entry);
  }
  return totals;
}

/** A counter's values per label set (keyed by `key(labels)`). */
export async function counterValues(
  counter: Counter<string> | Gauge<string>,
  key: (labels: Record<string, string | number>) => string = () => "",
): Promise<Map<string, number>> {
  const values = new Map<string, number>();
  for (const v of (await counter.get()).values) {
    const k = key(v.labels as Record<string, string | number>);
    values.set(k, (values.get(k) ?? 0) + v.value);
  }
  return values;
}
