/**
 * What trace.ts and otel.ts share: what a span is to codemode's code, whether tracing is on (otel.ts) or
 * off ({@link NO_SPAN}), how one starts, the tracer behind them, what it is started with, and how a
 * collector's URL is shown.
 * @module
 */

/** Attribute values a span takes; undefined ones are left out. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** W3C trace context, as a request's `_meta` (or HTTP headers) carries it. */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/** One span; while tracing is off, {@link NO_SPAN}, which does nothing. */
export interface TraceSpan {
  /** The trace's id (32 hex digits); undefined while tracing is off. */
  readonly traceId?: string;
  /** Whether the span is recorded (off, or not sampled: false); skip costly attributes when it is not. */
  readonly recording: boolean;
  set(attributes: SpanAttributes): void;
  /** Sets `key` to content (code, arguments, results) only under CODEMODE_TRACE_CONTENT=1: redacted, clipped. */
  content(key: string, value: () => unknown): void;
  rename(name: string): void;
  /**
   * Status error, with an exception event whose message is redacted and clipped; `type` is `error.type`.
   * The first failure of a span wins.
   */
  fail(error: unknown, type?: string): void;
  /** Status error without an exception (a tool's `isError`); `detail` is kept only as content. */
  failWith(type: string, detail?: string): void;
  /** Links another span (a prewarmed sandbox's start, from the run that first used it). */
  link(other: TraceSpan): void;
  /** This span's context for an outgoing request's `_meta`; undefined while tracing is off. */
  context(): TraceContext | undefined;
  /** Ends the span; later calls do nothing. */
  end(): void;
}

/** How a span starts: its parent is a span of this process, a remote context, or none (a trace of its own). */
export interface SpanStart {
  name: string;
  kind?: "internal" | "server" | "client";
  attributes?: SpanAttributes;
  parent?: TraceSpan;
  remote?: TraceContext;
  /** Contexts to link, e.g. the HTTP request's when `_meta` named the parent. */
  links?: TraceContext[];
}

/** What a collector said to the latest export. */
export interface ExportStatus {
  /** Where spans go. */
  url: string;
  exported: number;
  failed: number;
  /** Spans dropped because the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE). */
  dropped?: number;
  /** The latest failure, if the latest export failed. */
  error?: string;
}

/** The SDK side (otel.ts): a tracer provider with its exporter. */
export interface Tracer {
  start(span: SpanStart): TraceSpan;
  status(): ExportStatus;
  /** Exports what is queued and stops, waiting at most `timeoutMs`. */
  shutdown(timeoutMs: number): Promise<void>;
}

/** What tracing is started with. */
export interface TracingOptions {
  /** The collector's traces URL ({@link exportTarget}). */
  url: string;
  /** The process environment (OTEL_* variables the exporter and batching honour). */
  env: Record<string, string | undefined>;
  /** CODEMODE_TRACE_CONTENT: record code, arguments and results (redacted, clipped). */
  content: boolean;
  version: string;
  /** This node's id (a run's `codemode.node`). */
  node: string;
  /** Removes configured secrets from text a span will hold. */
  redact: (text: string) => string;
}

/** The span that does nothing: every span while tracing is off. */
export const NO_SPAN: TraceSpan = Object.freeze({
  traceId: undefined,
  recording: false,
  set() {},
  content() {},
  rename() {},
  fail() {},
  failWith() {},
  link() {},
  context: () => undefined,
  end() {},
});

/** A URL as logs may show it: no user, password or query (they may hold credentials). */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return "(not a URL)";
  }
}
