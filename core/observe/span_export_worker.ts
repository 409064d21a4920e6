/**
 * The worker thread behind `WorkerSpanProcessor` (span_export.ts): it rebuilds the ended spans the serve
 * posts as plain records into the shape the SDK's exporter reads (`ReadableSpan`) and hands them to the
 * SDK's own BatchSpanProcessor and OTLP/HTTP exporter. Serialising spans to protobuf and sending them is
 * the costly part of tracing; here it costs this thread, never the serve's event loop. Each export's
 * outcome goes back to the serve, which counts it, warns about it and frees its queue.
 * @module
 */
import { parentPort, workerData } from "node:worker_threads";
import type { Attributes, HrTime, Link, SpanContext, SpanKind, SpanStatus } from "@opentelemetry/api";
import { ExportResultCode, TraceState } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace";

/** A span context as it crosses threads: the trace state as its W3C text. */
export interface ContextRecord {
  traceId: string;
  spanId: string;
  traceFlags: number;
  traceState?: string;
  isRemote?: boolean;
}

/** An ended span as it crosses threads: what the OTLP exporter reads of a `ReadableSpan`, nothing more. */
export interface SpanRecord {
  name: string;
  kind: SpanKind;
  context: ContextRecord;
  parent?: ContextRecord;
  startTime: HrTime;
  endTime: HrTime;
  duration: HrTime;
  status: SpanStatus;
  attributes: Attributes;
  links: { context: ContextRecord; attributes?: Attributes; droppedAttributesCount?: number }[];
  events: { name: string; time: HrTime; attributes?: Attributes; droppedAttributesCount?: number }[];
  droppedAttributesCount: number;
  droppedEventsCount: number;
  droppedLinksCount: number;
  scope: { name: string; version?: string; schemaUrl?: string };
}

/** What the serve starts the worker with. */
export interface ExportSetup {
  url: string;
  /** The resource's attributes, resolved once by the serve. */
  resource: Attributes;
  /** The batching the OTEL_BSP_* variables asked for. */
  batch: {
    scheduledDelayMillis?: number;
    maxQueueSize?: number;
    maxExportBatchSize?: number;
    exportTimeoutMillis?: number;
  };
}

/** Serve → worker: spans to export, a flush (answered with its id), or the end (answered with `closed`). */
export type ToWorker = { spans: SpanRecord[] } | { flush: number } | { shutdown: true };
/** Worker → serve: loaded, an export's outcome, a flush done, closed. */
export type FromWorker =
  | { ready: true }
  | { exported: number }
  | { failed: number; error: string }
  | { flushed: number }
  | { closed: true };

const setup = workerData as ExportSetup;
const post = (message: FromWorker) => parentPort!.postMessage(message);
const resource = resourceFromAttributes(setup.resource);

/** The SDK's exporter, reporting each export's outcome to the serve. */
class ReportingExporter implements SpanExporter {
  #inner = new OTLPTraceExporter({ url: setup.url });

  export(spans: ReadableSpan[], done: Parameters<SpanExporter["export"]>[1]): void {
    this.#inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) post({ exported: spans.length });
      else {
        const error = result.error as Error | undefined;
        post({
          failed: spans.length,
          error: String(error?.message ?? error ?? "export failed").slice(0, 300),
        });
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush();
  }
}

const processor = new BatchSpanProcessor({ exporter: new ReportingExporter(), ...setup.batch });

function spanContext(record: ContextRecord): SpanContext {
  return {
    traceId: record.traceId,
    spanId: record.spanId,
    traceFlags: record.traceFlags,
    ...(record.traceState ? { traceState: new TraceState(record.traceState) } : {}),
    ...(record.isRemote ? { isRemote: true } : {}),
  };
}

function readable(record: SpanRecord): ReadableSpan {
  const context = spanContext(record.context);
  return {
    name: record.name,
    kind: record.kind,
    spanContext: () => context,
    parentSpanContext: record.parent ? spanContext(record.parent) : undefined,
    startTime: record.startTime,
    endTime: record.endTime,
    duration: record.duration,
    status: record.status,
    attributes: record.attributes,
    links: record.links.map((link): Link => ({ ...link, context: spanContext(link.context) })),
    events: record.events,
    ended: true,
    resource,
    instrumentationScope: record.scope,
    droppedAttributesCount: record.droppedAttributesCount,
    droppedEventsCount: record.droppedEventsCount,
    droppedLinksCount: record.droppedLinksCount,
  };
}

parentPort?.on("message", (message: ToWorker) => {
  if ("spans" in message) {
    for (const record of message.spans) processor.onEnd(readable(record));
  } else if ("flush" in message) {
    const id = message.flush;
    processor.forceFlush().catch(() => {}).finally(() => post({ flushed: id }));
  } else {
    processor.shutdown().catch(() => {}).finally(() => post({ closed: true }));
  }
});
post({ ready: true });
