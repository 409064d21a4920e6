/**
 * Traces: OpenTelemetry spans for runs, sandbox starts, tool calls, approval waits, catalog indexing,
 * upstream start-ups and skill reads, exported over OTLP/HTTP when an endpoint is set (see
 * docs/observability.md). Off by default, and then free: nothing of OpenTelemetry is loaded and every
 * span is one shared object that does nothing. The SDK side lives in `otel.ts`, imported on first use.
 *
 * Which span a piece of work belongs to is found the way its log lines find their request: a run's span
 * is bound to the run's log scope (calls coming back from the sandbox are served in that scope, so they
 * find it), and spans opened inside it (a tool call, whose upstream start and approval wait nest under
 * it) are carried by an AsyncLocalStorage of their own, trusted only within the log scope they were
 * opened in: a sandbox's frame reader inherits whatever was active when the sandbox started. Nothing
 * sandbox code sends ever names a span; trace context leaves the host only from the host's own spans.
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { currentLogScope, log, type LogScope } from "./log.ts";
import {
  type ExportStatus,
  NO_SPAN,
  type SpanAttributes,
  type TraceContext,
  type Tracer,
  type TraceSpan,
  type TracingOptions,
} from "./span.ts";

export { NO_SPAN, shownUrl } from "./span.ts";
export type { ExportStatus, SpanAttributes, TraceContext, TraceSpan, TracingOptions } from "./span.ts";

/**
 * Attribute names: the OpenTelemetry conventions' where one exists (MCP, GenAI tool execution, errors),
 * else `codemode.*`.
 */
export const ATTR = {
  mcpMethod: "mcp.method.name",
  mcpSession: "mcp.session.id",
  jsonrpcId: "jsonrpc.request.id",
  transport: "network.transport",
  operation: "gen_ai.operation.name",
  tool: "gen_ai.tool.name",
  toolArguments: "gen_ai.tool.call.arguments",
  toolResult: "gen_ai.tool.call.result",
  server: "codemode.server",
} as const;

/** A run's span and what its calls add to it. */
interface RunTrace {
  span: TraceSpan;
  toolCalls: number;
}

let tracer: Tracer | undefined;
let nodeId = "";
const runs = new WeakMap<LogScope, RunTrace>();
const entered = new AsyncLocalStorage<{ scope: LogScope | undefined; span: TraceSpan }>();

/**
 * The collector's traces URL from the settings and the standard variables, or undefined when tracing is
 * off: CODEMODE_OTLP_ENDPOINT (a base URL: `/v1/traces` is appended), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * (used as it is), else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL). OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none turn it off.
 */
export function exportTarget(
  endpoint: string | undefined,
  env: Record<string, string | undefined>,
): { url: string; from: string } | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === "none") return undefined;
  const base = (url: string) => url.replace(/\/+$/, "") + "/v1/traces";
  if (endpoint) return { url: base(endpoint), from: "CODEMODE_OTLP_ENDPOINT" };
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return { url: traces, from: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" };
  const any = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (any) return { url: base(any), from: "OTEL_EXPORTER_OTLP_ENDPOINT" };
  return undefined;
}

/** Loads OpenTelemetry and starts exporting; once per process. A failure to load is logged, never fatal. */
export async function startTracing(options: TracingOptions): Promise<boolean> {
  if (tracer) return true;
  try {
    const { createTracer } = await import("./otel.ts");
    tracer = createTracer(options);
    nodeId = options.node;
    log.info("tracing on", { url: options.url, content: options.content });
    return true;
  } catch (error) {
    log.warn("tracing could not start; runs go on without traces", { error: String(error) });
    return false;
  }
}

/** Exports the spans still queued (waiting at most `timeoutMs`) and turns tracing off. */
export async function stopTracing(timeoutMs = 2_000): Promise<void> {
  const stopping = tracer;
  tracer = undefined;
  await stopping?.shutdown(timeoutMs).catch(() => {});
}

/** Whether spans are recorded and exported. */
export function tracingOn(): boolean {
  return tracer !== undefined;
}

/** Where spans go and how the latest exports went; undefined while tracing is off. */
export function exportStatus(): ExportStatus | undefined {
  return tracer?.status();
}

/** The span work in progress belongs to: one opened in this log scope, else the scope's run. */
function currentSpan(): TraceSpan | undefined {
  const scope = currentLogScope();
  const inner = entered.getStore();
  if (inner && inner.scope === scope) return inner.span;
  return scope && runs.get(scope)?.span;
}

/**
 * Starts the span of a run (a run_python call unless `name` says otherwise; kind server) and binds it to
 * the run's log scope, whose lines then carry its trace id. `client.meta` is the trace context the client
 * sent (`_meta`), `client.header` the HTTP request's; the first is the parent, the other is linked.
 */
export function startRunSpan(
  scope: LogScope,
  attributes: SpanAttributes,
  client: { meta?: TraceContext; header?: TraceContext } = {},
  name = "tools/call run_python",
): TraceSpan {
  if (!tracer) return NO_SPAN;
  const remote = client.meta ?? client.header;
  const span = tracer.start({
    name,
    kind: "server",
    attributes: { ...attributes, "codemode.node": nodeId },
    remote,
    links: client.meta && client.header ? [client.header] : undefined,
  });
  runs.set(scope, { span, toolCalls: 0 });
  scope.traceId = span.traceId;
  return span;
}

/** How many tool calls the run of `scope` made (for its span's `codemode.tool_calls`). */
export function runToolCalls(scope: LogScope): number {
  return runs.get(scope)?.toolCalls ?? 0;
}

/**
 * Runs `fn` in a new span, a child of the current one (or a trace of its own), which calls made inside
 * it see as theirs; ends it when `fn` settles, failed when it throws. `toolCall` counts it as a tool call
 * of the run it is in.
 */
export function inSpan<T>(
  name: string,
  attributes: SpanAttributes,
  fn: (span: TraceSpan) => Promise<T>,
  options: { kind?: "internal" | "client"; toolCall?: boolean } = {},
): Promise<T> {
  if (!tracer) return fn(NO_SPAN);
  const scope = currentLogScope();
  if (options.toolCall && scope) {
    const run = runs.get(scope);
    if (run) run.toolCalls++;
  }
  const span = tracer.start({ name, kind: options.kind, attributes, parent: currentSpan() });
  return entered.run({ scope, span }, async () => {
    try {
      return await fn(span);
    } catch (error) {
      span.fail(error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Starts a span, a child of the current one, that outlives the caller (a sandbox start); end it yourself. */
export function startSpan(name: string, attributes: SpanAttributes): TraceSpan {
  return tracer ? tracer.start({ name, attributes, parent: currentSpan() }) : NO_SPAN;
}

/**
 * Tells the current run which sandbox it ran in, and links the start of that sandbox when another trace
 * holds it (a prewarmed start, outside any run).
 */
export function noteRunSandbox(attributes: SpanAttributes, start?: TraceSpan): void {
  if (!tracer) return;
  const scope = currentLogScope();
  const run = scope && runs.get(scope);
  if (!run) return;
  run.span.set(attributes);
  if (start && start.traceId !== run.span.traceId) run.span.link(start);
}

/**
 * Whether the collector at `url` answers an export (of no spans: nothing is stored), within `timeoutMs`;
 * loads the exporter for the asking.
 */
export async function probeCollector(
  url: string,
  timeoutMs = 5_000,
): Promise<{ ok: boolean; ms: number; error?: string }> {
  const { probeCollector } = await import("./otel.ts");
  return await probeCollector(url, timeoutMs);
}
