/**
 * The OpenTelemetry side of tracing, loaded only when tracing is on (trace.ts imports it on demand): a
 * tracer provider whose ended spans are handed to a worker thread (span_export.ts) where the SDK's batch
 * processor and exporter send them over OTLP/HTTP (protobuf), the W3C propagator for `traceparent` in and
 * out, and the span object codemode's code holds. Exports never block a run: spans wait in a bounded queue
 * (new spans are dropped and counted while it is full), and an unreachable collector costs a warning at
 * most once a minute.
 * @module
 */
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { ExportResultCode, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import { TracerProvider } from "@opentelemetry/sdk-trace";
import {
  ATTR_ERROR_TYPE,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
} from "@opentelemetry/semantic-conventions";
import { hostname } from "node:os";
import { log } from "./log.ts";
import type { SpanAttributes, SpanStart, TraceContext, Tracer, TraceSpan, TracingOptions } from "./span.ts";
import { WorkerSpanProcessor } from "./span_export.ts";

/** Longest error message a span keeps. */
const MAX_MESSAGE = 300;
/** Longest content attribute (code, arguments, results) a span keeps. */
const MAX_CONTENT = 4096;

const propagator = new W3CTraceContextPropagator();
const KINDS = { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT };

/** A tracer provider exporting to `options.url`, batched as the OTEL_BSP_* variables say. */
export function createTracer(options: TracingOptions): Tracer {
  const protocol = options.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? options.env.OTEL_EXPORTER_OTLP_PROTOCOL;
  if (protocol && protocol.trim() !== "http/protobuf") {
    log.warn("codemode exports traces as http/protobuf only; the protocol asked for is ignored", {
      protocol,
    });
  }
  const number = (name: string) => {
    const value = Number(options.env[name]);
    return Number.isFinite(value) && value > 0 ? value : undefined;
  };
  const resource = defaultResource()
    .merge(resourceFromAttributes({
      [ATTR_SERVICE_NAME]: "codemode",
      [ATTR_SERVICE_VERSION]: options.version,
      "host.name": hostname(),
      "process.pid": process.pid,
      // The fleet node (CODEMODE_NODE_ID, else the host name): which node of a fleet a trace ran on.
      "codemode.node": options.node,
    }))
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win, as everywhere else.
    .merge(detectResources({ detectors: [envDetector] }));
  // Spans are made here and exported by the SDK's batch processor and exporter in a worker thread.
  const exporting = new WorkerSpanProcessor({
    url: options.url,
    resource: resource.attributes,
    batch: {
      scheduledDelayMillis: number("OTEL_BSP_SCHEDULE_DELAY"),
      maxQueueSize: number("OTEL_BSP_MAX_QUEUE_SIZE"),
      maxExportBatchSize: number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
      exportTimeoutMillis: number("OTEL_BSP_EXPORT_TIMEOUT"),
    },
  });
  const provider = new TracerProvider({
    resource,
    spanLimits: { attributeValueLengthLimit: MAX_CONTENT, linkCountLimit: 16, eventCountLimit: 16 },
    spanProcessors: [exporting],
  });
  const tracer = provider.getTracer("codemode", options.version);
  const clip = (text: string, max: number) => text.length > max ? text.slice(0, max - 1) + "…" : text;
  const shape: SpanShape = {
    message: (text) => clip(options.redact(text), MAX_MESSAGE),
    content: options.content ? (text) => clip(options.redact(text), MAX_CONTENT) : undefined,
  };
  return {
    start(start: SpanStart): TraceSpan {
      const parent = start.parent instanceof OtelSpan
        ? start.parent.otelContext
        : start.remote
        ? remoteContext(start.remote)
        : ROOT_CONTEXT;
      const links = start.links?.flatMap((c) => {
        const context = trace.getSpanContext(remoteContext(c));
        return context ? [{ context } satisfies Link] : [];
      });
      const span = tracer.startSpan(start.name, {
        kind: KINDS[start.kind ?? "internal"],
        attributes: defined(start.attributes ?? {}),
        ...(links?.length ? { links } : {}),
      }, parent);
      return new OtelSpan(span, parent, shape);
    },
    status: () => exporting.status(),
    async shutdown(timeoutMs) {
      await exporting.close(timeoutMs);
      await provider.shutdown();
    },
  };
}

/** How a span words what it keeps: messages always, content (code, arguments) only when asked for. */
interface SpanShape {
  message: (text: string) => string;
  content?: (text: string) => string;
}

/** A span codemode holds: the SDK's span, and the context that makes it a parent once a child asks. */
class OtelSpan implements TraceSpan {
  #ended = false;
  /** The first failure recorded wins: an `isError` result that unwrapping then throws is one failure. */
  #failed = false;
  #context: Context | undefined;

  constructor(readonly span: Span, private readonly parent: Context, private readonly shape: SpanShape) {}

  /** The context that makes this span a parent (most spans never have a child: made on first use). */
  get otelContext(): Context {
    return this.#context ??= trace.setSpan(this.parent, this.span);
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  get recording(): boolean {
    return this.span.isRecording();
  }

  set(attributes: SpanAttributes): void {
    for (const key in attributes) {
      const value = attributes[key];
      if (value !== undefined) this.span.setAttribute(key, value);
    }
  }

  content(key: string, value: () => unknown): void {
    if (!this.shape.content || !this.recording) return;
    const raw = value();
    this.span.setAttribute(
      key,
      this.shape.content(typeof raw === "string" ? raw : JSON.stringify(raw) ?? ""),
    );
  }

  rename(name: string): void {
    this.span.updateName(name);
  }

  fail(error: unknown, type?: string): void {
    if (!this.recording || this.#failed) return;
    this.#failed = true;
    const name = error instanceof Error ? error.name : typeof error;
    const message = this.shape.message(error instanceof Error ? error.message : String(error));
    // Not recordException: its stack trace repeats the message unredacted and names host paths.
    this.span.addEvent("exception", { "exception.type": name, "exception.message": message });
    this.span.setAttribute(ATTR_ERROR_TYPE, type ?? name);
    this.span.setStatus({ code: SpanStatusCode.ERROR, message });
  }

  failWith(type: string, detail?: string): void {
    if (this.#failed) return;
    this.#failed = true;
    this.span.setAttribute(ATTR_ERROR_TYPE, type);
    const message = detail !== undefined && this.shape.content ? this.shape.content(detail) : undefined;
    this.span.setStatus({ code: SpanStatusCode.ERROR, ...(message ? { message } : {}) });
  }

  link(other: TraceSpan): void {
    if (other instanceof OtelSpan) this.span.addLink({ context: other.span.spanContext() });
  }

  context(): TraceContext | undefined {
    const carrier: Record<string, string> = {};
    propagator.inject(this.otelContext, carrier, defaultTextMapSetter);
    return carrier.traceparent
      ? {
        traceparent: carrier.traceparent,
        ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}),
      }
      : undefined;
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.span.end();
  }
}

/** The parent a remote context names (the W3C propagator validates it; an invalid one is no parent). */
function remoteContext(remote: TraceContext): Context {
  return propagator.extract(ROOT_CONTEXT, remote, defaultTextMapGetter);
}

function defined(attributes: SpanAttributes): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/**
 * Whether the collector at `url` answers: one export of no spans (an empty request the collector accepts
 * and stores nothing for), with the exporter's own headers and TLS settings from OTEL_* variables.
 */
export function probeCollector(
  url: string,
  timeoutMs: number,
): Promise<{ ok: boolean; ms: number; error?: string }> {
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: timeoutMs });
  const started = performance.now();
  return new Promise((resolve) => {
    exporter.export([], (result) => {
      const ms = Math.round(performance.now() - started);
      void exporter.shutdown().catch(() => {});
      resolve(
        result.code === ExportResultCode.SUCCESS
          ? { ok: true, ms }
          : { ok: false, ms, error: String(result.error?.message ?? result.error ?? "export failed") },
      );
    });
  });
}
