/**
 * Span export off the serve's event loop: a span processor whose `onEnd` copies each ended span into a
 * plain record (span_export_worker.ts names what it holds) and posts them, a batch at a time, to a worker
 * thread that feeds the SDK's BatchSpanProcessor and OTLP/HTTP exporter. The serve makes the spans; the
 * worker does the export (protobuf, HTTP, retries while a collector is down), which thus never holds up
 * the event loop that serves runs (BENCHMARKS.md, "tracing", for what that saves and what it does not).
 *
 * Bounded: spans handed over and not yet exported or failed are at most the queue size
 * (OTEL_BSP_MAX_QUEUE_SIZE, 2048 by default); beyond it new spans are dropped and counted. The worker
 * never keeps the process alive on its own; `shutdown` hands it what is queued and waits (within its
 * deadline) for it to be sent. Outcomes come back from the worker: exports, failures and drops are
 * counted, and an unreachable collector or a full queue is warned about at most once a minute.
 * @module
 */
import { Worker } from "node:worker_threads";
import type { SpanContext } from "@opentelemetry/api";
import type { ReadableSpan, SpanProcessor } from "@opentelemetry/sdk-trace";
import { log } from "./log.ts";
import type { ExportStatus } from "./span.ts";
import { shownUrl } from "./span.ts";
import type { ContextRecord, ExportSetup, FromWorker, SpanRecord, ToWorker } from "./span_export_worker.ts";

/** Ended spans wait on the serve this long at most before they are posted to the worker together. */
const HAND_OVER_MS = 50;
/** An unreachable collector, or a full queue, is reported at most this often. */
const WARN_EVERY_MS = 60_000;
const DEFAULT_QUEUE = 2048;
const DEFAULT_BATCH = 512;
/** How long closing waits for a worker still loading, before its own deadline starts. */
const LOAD_WAIT_MS = 10_000;

export class WorkerSpanProcessor implements SpanProcessor {
  #setup: ExportSetup;
  #worker: Worker | undefined;
  #broken = false;
  #buffer: SpanRecord[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Spans handed to the worker (or waiting to be) whose export has not ended. */
  #held = 0;
  #maxQueue: number;
  #batch: number;
  #status: ExportStatus;
  #failedWarnedAt = -Infinity;
  #failedSinceWarning = 0;
  #droppedWarnedAt = -Infinity;
  #flushes = new Map<number, () => void>();
  #flushId = 0;
  #closing: Promise<void> | undefined;
  #closed: (() => void) | undefined;
  /** Whether the worker has loaded (its exporter is ready). */
  #ready = false;
  #onReady: (() => void) | undefined;

  constructor(setup: ExportSetup) {
    this.#setup = setup;
    this.#maxQueue = setup.batch.maxQueueSize ?? DEFAULT_QUEUE;
    this.#batch = Math.min(setup.batch.maxExportBatchSize ?? DEFAULT_BATCH, this.#maxQueue);
    this.#status = { url: shownUrl(setup.url), exported: 0, failed: 0, dropped: 0 };
    // Started now, not with the first span: the worker loads the exporter (a few hundred ms of its own
    // CPU) before runs make spans, so the first burst of spans does not wait for it in the queue.
    this.#start();
  }

  status(): ExportStatus {
    return { ...this.#status };
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.#closing || (span.spanContext().traceFlags & 1) === 0) return;
    if (this.#broken || this.#held >= this.#maxQueue) return this.#dropped(1);
    this.#held++;
    this.#buffer.push(spanRecord(span));
    if (this.#buffer.length >= this.#batch) this.#handOver();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => this.#handOver(), HAND_OVER_MS);
      unref(this.#timer);
    }
  }

  /** Hands the worker what is waiting, and resolves once it has exported (or failed) all it holds. */
  forceFlush(): Promise<void> {
    this.#handOver();
    const worker = this.#worker;
    if (!worker || this.#closing) return this.#closing ?? Promise.resolve();
    const id = ++this.#flushId;
    worker.ref();
    return new Promise<void>((resolve) => {
      this.#flushes.set(id, resolve);
      this.#send({ flush: id });
    }).finally(() => this.#unrefWhenIdle());
  }

  shutdown(): Promise<void> {
    return this.close(30_000);
  }

  /**
   * Hands over what is waiting, lets the worker export it within `timeoutMs`, then ends the worker. A
   * worker still loading (a short `codemode run` on a busy machine) is given up to LOAD_WAIT_MS to load
   * first: the deadline is the export's, not the module loading's.
   */
  close(timeoutMs: number): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#handOver();
    const worker = this.#worker;
    if (!worker) return this.#closing = Promise.resolve();
    worker.ref();
    let timer: ReturnType<typeof setTimeout> | undefined;
    this.#closing = new Promise<void>((resolve) => {
      this.#closed = resolve;
      const exportDeadline = () => (clearTimeout(timer), timer = setTimeout(resolve, timeoutMs));
      if (this.#ready) exportDeadline();
      else {
        this.#onReady = exportDeadline;
        timer = setTimeout(resolve, LOAD_WAIT_MS + timeoutMs);
      }
      this.#send({ shutdown: true });
    }).finally(() => {
      clearTimeout(timer);
      this.#worker = undefined;
      for (const resolve of this.#flushes.values()) resolve();
      this.#flushes.clear();
      void worker.terminate();
    });
    return this.#closing;
  }

  #handOver(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#buffer.length === 0) return;
    const spans = this.#buffer;
    this.#buffer = [];
    this.#send({ spans });
  }

  #send(message: ToWorker): void {
    const worker = this.#worker ?? this.#start();
    if (!worker) {
      if ("spans" in message) this.#lost(message.spans.length);
      return;
    }
    try {
      worker.postMessage(message);
    } catch (error) {
      // Only a span holding something structured clone refuses: never expected, never fatal.
      log.debug("spans could not be handed to the export worker", { error: String(error) });
      if ("spans" in message) this.#lost(message.spans.length);
    }
  }

  #start(): Worker | undefined {
    if (this.#broken) return undefined;
    let worker: Worker;
    try {
      worker = new Worker(workerEntry(), { workerData: this.#setup });
    } catch (error) {
      this.#fail(String(error));
      return undefined;
    }
    worker.unref();
    worker.on("message", (message: FromWorker) => this.#answer(message));
    worker.on("error", (error) => {
      if (worker === this.#worker) this.#fail(error.message);
    });
    this.#worker = worker;
    return worker;
  }

  #answer(message: FromWorker): void {
    if ("ready" in message) {
      this.#ready = true;
      this.#onReady?.();
    } else if ("exported" in message) {
      const wasFailing = this.#status.error !== undefined;
      this.#held -= message.exported;
      this.#status = {
        ...this.#status,
        exported: this.#status.exported + message.exported,
        error: undefined,
      };
      if (wasFailing) log.info("traces reach the OTLP collector again", { url: this.#status.url });
    } else if ("failed" in message) {
      this.#held -= message.failed;
      this.#exportFailed(message.failed, message.error);
    } else if ("flushed" in message) {
      this.#flushes.get(message.flushed)?.();
      this.#flushes.delete(message.flushed);
    } else if ("closed" in message) {
      this.#closed?.();
    }
  }

  /** The worker could not start or died: spans from now on are dropped, said once. */
  #fail(error: string): void {
    this.#broken = true;
    this.#worker = undefined;
    // What waits to be handed over is counted in `#held`, lost below with the rest.
    this.#buffer = [];
    clearTimeout(this.#timer);
    this.#timer = undefined;
    log.warn("traces cannot be exported: the export worker stopped; runs go on without traces", { error });
    this.#lost(this.#held);
    this.#closed?.();
    for (const resolve of this.#flushes.values()) resolve();
    this.#flushes.clear();
  }

  /** Spans already counted as held that will never be exported (counted as dropped; warned about apart). */
  #lost(count: number): void {
    this.#held -= count;
    if (count > 0) this.#status = { ...this.#status, dropped: (this.#status.dropped ?? 0) + count };
  }

  #dropped(count: number): void {
    if (count <= 0) return;
    this.#status = { ...this.#status, dropped: (this.#status.dropped ?? 0) + count };
    const now = performance.now();
    if (now - this.#droppedWarnedAt < WARN_EVERY_MS) return;
    this.#droppedWarnedAt = now;
    log.warn("spans dropped: the trace export queue is full (OTEL_BSP_MAX_QUEUE_SIZE)", {
      url: this.#status.url,
      dropped: this.#status.dropped,
    });
  }

  #exportFailed(count: number, message: string): void {
    this.#status = { ...this.#status, failed: this.#status.failed + count, error: message };
    this.#failedSinceWarning++;
    log.debug("trace export failed", { url: this.#status.url, spans: count, error: message });
    const now = performance.now();
    if (now - this.#failedWarnedAt < WARN_EVERY_MS) return;
    log.warn("traces cannot be sent to the OTLP collector; runs go on, their spans are dropped", {
      url: this.#status.url,
      error: message,
      failedExports: this.#failedSinceWarning,
    });
    this.#failedWarnedAt = now;
    this.#failedSinceWarning = 0;
  }

  #unrefWhenIdle(): void {
    if (this.#flushes.size === 0 && !this.#closing) this.#worker?.unref();
  }
}

/** The plain copy of an ended span the worker rebuilds: what the OTLP exporter reads, nothing more. */
export function spanRecord(span: ReadableSpan): SpanRecord {
  const scope = span.instrumentationScope;
  return {
    name: span.name,
    kind: span.kind,
    context: contextRecord(span.spanContext()),
    ...(span.parentSpanContext ? { parent: contextRecord(span.parentSpanContext) } : {}),
    startTime: span.startTime,
    endTime: span.endTime,
    duration: span.duration,
    status: span.status,
    attributes: span.attributes,
    links: span.links.map((link) => ({
      context: contextRecord(link.context),
      ...(link.attributes ? { attributes: link.attributes } : {}),
      ...(link.droppedAttributesCount ? { droppedAttributesCount: link.droppedAttributesCount } : {}),
    })),
    events: span.events.map((event) => ({
      name: event.name,
      time: event.time,
      ...(event.attributes ? { attributes: event.attributes } : {}),
      ...(event.droppedAttributesCount ? { droppedAttributesCount: event.droppedAttributesCount } : {}),
    })),
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
    scope: {
      name: scope.name,
      ...(scope.version ? { version: scope.version } : {}),
      ...(scope.schemaUrl ? { schemaUrl: scope.schemaUrl } : {}),
    },
  };
}

function contextRecord(context: SpanContext): ContextRecord {
  const traceState = context.traceState?.serialize();
  return {
    traceId: context.traceId,
    spanId: context.spanId,
    traceFlags: context.traceFlags,
    ...(traceState ? { traceState } : {}),
    ...(context.isRemote ? { isRemote: true } : {}),
  };
}

/**
 * Where the worker's module is: beside this one, except in a binary compiled by Bun (scripts/compile.sh),
 * whose modules share one virtual folder while the worker, an entry of its own, keeps its repository path.
 * Bundled to JavaScript (the npm package, scripts/build_npm.ts), the worker is an entry of its own too,
 * built beside the bundle's chunks.
 */
function workerEntry(): URL | string {
  if (import.meta.url.startsWith("file:///$bunfs/")) return "./core/observe/span_export_worker.ts";
  if (import.meta.url.endsWith(".js")) return new URL("./span_export_worker.js", import.meta.url);
  return new URL("./span_export_worker.ts", import.meta.url);
}

function unref(timer: ReturnType<typeof setTimeout>): void {
  (timer as { unref?: () => void }).unref?.();
}
