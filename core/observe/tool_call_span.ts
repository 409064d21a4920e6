/**
 * A tool call's span, made by codemode rather than by the SDK's tracer (otel.ts picks it, and it loads
 * only with otel.ts): a tool call is the one span a run makes by the hundred, and the SDK's span (sampler,
 * id generator, attribute checks twice, span metrics, two clocks) was most of what tracing cost a call
 * (BENCHMARKS.md, "Where a traced tool call's CPU goes"). It is made only under a sampled parent of this
 * process, and it is what the SDK's would be: the parent's trace, flags and state, a random span id,
 * attributes, events and links within the provider's limits, status and times, handed to the same
 * BatchSpanProcessor (and so the SDK's exporter) when it ends.
 * @module
 */
import {
  type Attributes,
  type AttributeValue,
  type HrTime,
  type Link,
  type Span,
  type SpanContext,
  type SpanKind,
  type SpanStatus,
  SpanStatusCode,
} from "@opentelemetry/api";
import { hrTime, hrTimeDuration, type InstrumentationScope } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan, SpanProcessor, TimedEvent } from "@opentelemetry/sdk-trace";

/** Longest attribute value (content: code, arguments, results) a span keeps. */
export const MAX_CONTENT = 4096;
/** Most attributes, events and links a span keeps (the provider is given the same limits). */
export const MAX_ATTRIBUTES = 128;
export const MAX_EVENTS = 16;
export const MAX_LINKS = 16;

/** What the SDK's spans of this process share: the batch processor, the resource, the scope. */
export interface SdkParts {
  batch: SpanProcessor;
  resource: Resource;
  scope: InstrumentationScope;
}

/** A tool call's span; see the module's comment. */
export class ToolCallSpan implements Span, ReadableSpan {
  readonly kind: SpanKind;
  readonly startTime: HrTime = hrTime();
  endTime: HrTime = [0, 0];
  duration: HrTime = [0, 0];
  status: SpanStatus = { code: SpanStatusCode.UNSET };
  readonly attributes: Attributes = {};
  readonly links: Link[] = [];
  readonly events: TimedEvent[] = [];
  ended = false;
  droppedAttributesCount = 0;
  droppedEventsCount = 0;
  droppedLinksCount = 0;
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
  name: string;
  readonly #context: SpanContext;
  readonly #batch: SpanProcessor;

  constructor(
    name: string,
    kind: SpanKind,
    attributes: Attributes,
    readonly parentSpanContext: SpanContext,
    sdk: SdkParts,
  ) {
    this.name = name;
    this.kind = kind;
    this.#context = {
      traceId: parentSpanContext.traceId,
      spanId: spanId(),
      traceFlags: parentSpanContext.traceFlags,
      traceState: parentSpanContext.traceState,
    };
    this.#batch = sdk.batch;
    this.resource = sdk.resource;
    this.instrumentationScope = sdk.scope;
    this.setAttributes(attributes);
  }

  spanContext(): SpanContext {
    return this.#context;
  }

  isRecording(): boolean {
    return !this.ended;
  }

  setAttribute(key: string, value?: AttributeValue): this {
    if (this.ended || value === undefined || value === null) return this;
    if (!(key in this.attributes) && Object.keys(this.attributes).length >= MAX_ATTRIBUTES) {
      this.droppedAttributesCount++;
      return this;
    }
    this.attributes[key] = typeof value === "string" && value.length > MAX_CONTENT
      ? value.slice(0, MAX_CONTENT)
      : value;
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const key in attributes) this.setAttribute(key, attributes[key]);
    return this;
  }

  addEvent(name: string, attributes?: Attributes): this {
    if (this.ended) return this;
    if (this.events.length >= MAX_EVENTS) this.droppedEventsCount++;
    else this.events.push({ name, attributes: attributes ?? {}, time: hrTime(), droppedAttributesCount: 0 });
    return this;
  }

  addLink(link: Link): this {
    if (this.ended) return this;
    if (this.links.length >= MAX_LINKS) this.droppedLinksCount++;
    else this.links.push(link);
    return this;
  }

  addLinks(links: Link[]): this {
    for (const link of links) this.addLink(link);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (!this.ended) this.status = { ...status };
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  recordException(): void {
    // Not used: OtelSpan.fail adds a redacted exception event itself.
  }

  end(): void {
    if (this.ended) return;
    this.endTime = hrTime();
    this.duration = hrTimeDuration(this.startTime, this.endTime);
    this.ended = true;
    this.#batch.onEnd(this);
  }
}

/** 16 random hex digits, not all zero (a W3C span id), without the SDK generator's Buffer. */
function spanId(): string {
  const high = (Math.random() * 0x1_0000_0000) >>> 0;
  const low = ((Math.random() * 0x1_0000_0000) >>> 0) || 1;
  return HEX[high >>> 24] + HEX[(high >>> 16) & 255] + HEX[(high >>> 8) & 255] + HEX[high & 255] +
    HEX[low >>> 24] + HEX[(low >>> 16) & 255] + HEX[(low >>> 8) & 255] + HEX[low & 255];
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
