/**
 * A real OTLP/HTTP trace receiver for the tests: a `node:http` server on an ephemeral port that takes
 * what the OpenTelemetry exporter POSTs to `/v1/traces` (protobuf, gzip or not), decodes it with protobufjs
 * against tests/testdata/otlp/trace.proto, and keeps the spans and the raw bodies.
 * @module
 */
import { createServer, type Server } from "node:http";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";

/** One span as the collector received it. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client (OTLP's SpanKind). */
  kind: number;
  /** Milliseconds since the epoch. */
  start: number;
  end: number;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  links: { traceId: string; spanId: string }[];
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, unknown>;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** The base URL (what CODEMODE_OTLP_ENDPOINT takes). */
  url: string;
  spans: ReceivedSpan[];
  /** Every request body as it arrived (after gunzip), for searches over the raw bytes. */
  bodies: Uint8Array[];
  /** Export requests answered. */
  requests: number;
  /** Resolves with the spans `pick` finds once it finds any, polling; fails after `timeoutMs`. */
  waitFor(pick: (spans: ReceivedSpan[]) => ReceivedSpan[], timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const root = protobuf.parse(
  readFileSync(new URL("../testdata/otlp/trace.proto", import.meta.url), "utf8"),
).root;
const Request = root.lookupType("otlp.ExportTraceServiceRequest");

/** Starts a receiver on 127.0.0.1 and an ephemeral port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver: Omit<OtlpReceiver, "url" | "close"> = {
    spans: [],
    bodies: [],
    requests: 0,
    async waitFor(pick, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = pick(receiver.spans);
        if (found.length) return found;
        if (Date.now() > deadline) {
          throw new Error(
            `no such spans within ${timeoutMs} ms; received: ${receiver.spans.map((s) => s.name).join(", ")}`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Uint8Array[] = [];
    req.on("data", (chunk: Uint8Array) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      let body: Uint8Array = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      try {
        receiver.spans.push(...decode(body));
        receiver.bodies.push(body);
        receiver.requests++;
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      } catch (error) {
        res.writeHead(400, { "content-type": "text/plain" }).end(String(error));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    ...receiver,
    get spans() {
      return receiver.spans;
    },
    get bodies() {
      return receiver.bodies;
    },
    get requests() {
      return receiver.requests;
    },
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface KeyValue {
  key: string;
  value?: Record<string, unknown>;
}

/** The spans of one ExportTraceServiceRequest. */
export function decode(body: Uint8Array): ReceivedSpan[] {
  const request = Request.toObject(Request.decode(body), {
    longs: String,
    bytes: Array,
    defaults: true,
    oneofs: true,
  }) as {
    resourceSpans: {
      resource?: { attributes: KeyValue[] };
      scopeSpans: { spans: Record<string, unknown>[] }[];
    }[];
  };
  return request.resourceSpans.flatMap((rs) => {
    const resource = attributes(rs.resource?.attributes ?? []);
    return rs.scopeSpans.flatMap((ss) =>
      ss.spans.map((s): ReceivedSpan => ({
        traceId: hex(s.traceId),
        spanId: hex(s.spanId),
        parentSpanId: hex(s.parentSpanId),
        name: s.name as string,
        kind: s.kind as number,
        start: Number(BigInt(s.startTimeUnixNano as string) / 1000n) / 1000,
        end: Number(BigInt(s.endTimeUnixNano as string) / 1000n) / 1000,
        attributes: attributes(s.attributes as KeyValue[]),
        events: (s.events as { name: string; attributes: KeyValue[] }[]).map((e) => ({
          name: e.name,
          attributes: attributes(e.attributes),
        })),
        links: (s.links as { traceId: number[]; spanId: number[] }[]).map((l) => ({
          traceId: hex(l.traceId),
          spanId: hex(l.spanId),
        })),
        status: {
          code: (s.status as { code?: number } | undefined)?.code ?? 0,
          message: (s.status as { message?: string } | undefined)?.message ?? "",
        },
        resource,
      }))
    );
  });
}

function attributes(list: KeyValue[]): Record<string, unknown> {
  return Object.fromEntries(list.map((kv) => [kv.key, anyValue(kv.value ?? {})]));
}

/** An AnyValue's one set member (`oneofs: true` names it), as a plain value. */
function anyValue(value: Record<string, unknown>): unknown {
  const member = value.value as string | undefined;
  if (!member) return null;
  const held = value[member];
  if (member === "intValue") return Number(held);
  if (member === "arrayValue") {
    return ((held as { values?: Record<string, unknown>[] }).values ?? []).map(anyValue);
  }
  if (member === "kvlistValue") return attributes((held as { values?: KeyValue[] }).values ?? []);
  return held;
}

function hex(bytes: unknown): string {
  return Array.isArray(bytes) ? bytes.map((b: number) => b.toString(16).padStart(2, "0")).join("") : "";
}
