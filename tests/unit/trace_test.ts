/**
 * core/observe/trace.ts with the real OpenTelemetry SDK and exporter, sending to a real OTLP/HTTP receiver
 * in this process: what is exported, how spans find their parent (run scope, entered spans, a stale
 * context a frame reader inherited), the trace context sent out, redaction, content, and a dead collector.
 */
import assert from "node:assert/strict";
import { type LogScope, setLogLevel, setLogSink, withLogScope } from "../../core/observe/log.ts";
import {
  exportStatus,
  exportTarget,
  inSpan,
  NO_SPAN,
  noteRunSandbox,
  probeCollector,
  runToolCalls,
  startRunSpan,
  startSpan,
  startTracing,
  stopTracing,
  tracingOn,
} from "../../core/observe/trace.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../integration/_otlp_receiver.ts";
import { checkTracing } from "../../core/doctor/tracing.ts";
import { fakeRuntime, fakeSessions } from "./_fake_runtime.ts";

const SECRET = "sk-test-5e1f0c9a7b3d";
const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const CLIENT_PARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });

async function traced(
  receiver: OtlpReceiver | string,
  fn: () => Promise<void>,
  options: { content?: boolean; env?: Record<string, string> } = {},
): Promise<void> {
  const url = typeof receiver === "string" ? receiver : `${receiver.url}/v1/traces`;
  assert.ok(
    await startTracing({
      url,
      env: { OTEL_BSP_SCHEDULE_DELAY: "50", ...options.env },
      content: options.content ?? false,
      version: "test",
      node: "node-a",
      redact: (text) => text.replaceAll(SECRET, "[redacted]"),
    }),
  );
  try {
    await fn();
  } finally {
    await stopTracing(5_000);
  }
}

test("exportTarget(): CODEMODE_OTLP_ENDPOINT first, then the traces endpoint as given, then the base one", () => {
  assert.equal(exportTarget(undefined, {}), undefined);
  assert.deepEqual(exportTarget("http://c:4318/", { OTEL_EXPORTER_OTLP_ENDPOINT: "http://o:1" }), {
    url: "http://c:4318/v1/traces",
    from: "CODEMODE_OTLP_ENDPOINT",
  });
  assert.deepEqual(
    exportTarget(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://o:1",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:2/custom",
    })?.url,
    "http://t:2/custom",
  );
  assert.equal(
    exportTarget(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://o:1" })?.url,
    "http://o:1/v1/traces",
  );
  assert.equal(exportTarget("http://c:1", { OTEL_SDK_DISABLED: "true" }), undefined);
  assert.equal(exportTarget("http://c:1", { OTEL_TRACES_EXPORTER: "none" }), undefined);
  return Promise.resolve();
});

test("tracing off: every span is the shared no-op and the work runs as it would without tracing", async () => {
  assert.equal(tracingOn(), false);
  const scope: LogScope = { requestId: "r" };
  assert.equal(startRunSpan(scope, {}, { meta: { traceparent: CLIENT_PARENT } }), NO_SPAN);
  assert.equal(scope.traceId, undefined);
  assert.equal(await inSpan("x", {}, (span) => Promise.resolve(span)), NO_SPAN);
  assert.equal(startSpan("sandbox.start", {}), NO_SPAN);
  assert.equal(NO_SPAN.context(), undefined);
  assert.equal(exportStatus(), undefined);
});

test("a run continues the client's trace; its tool calls are its children and carry their own traceparent out", async () => {
  const receiver = await startOtlpReceiver();
  try {
    await traced(receiver, async () => {
      const scope: LogScope = { requestId: "stdio.1.abcd" };
      const run = startRunSpan(scope, { "codemode.session": "stdio" }, {
        meta: { traceparent: CLIENT_PARENT },
      });
      assert.equal(scope.traceId, CLIENT_TRACE);
      const sent: string[] = [];
      await withLogScope(scope, async () => {
        const start = startSpan("sandbox.start", {});
        start.end();
        noteRunSandbox({ "codemode.runtime": "podman" }, start);
        await Promise.all([1, 2, 3].map((n) =>
          inSpan(`tools/call t${n}`, {}, async (span) => {
            await new Promise((r) => setTimeout(r, 30));
            // A span opened inside the tool call (an upstream start) nests under it.
            await inSpan("initialize", {}, () => Promise.resolve());
            sent.push(span.context()!.traceparent);
          }, { kind: "client", toolCall: true })
        ));
      });
      assert.equal(runToolCalls(scope), 3);
      run.end();
      const spans = await receiver.waitFor((all) => all.length >= 8 ? all : []);
      const byName = (name: string) => spans.filter((s) => s.name === name);
      const [root] = byName("tools/call run_python");
      assert.equal(root.traceId, CLIENT_TRACE);
      assert.equal(root.parentSpanId, CLIENT_SPAN);
      assert.equal(root.kind, 2);
      assert.equal(root.attributes["codemode.node"], "node-a");
      assert.equal(root.attributes["codemode.runtime"], "podman");
      assert.equal(root.resource["service.name"], "codemode");
      const [start] = byName("sandbox.start");
      assert.equal(start.parentSpanId, root.spanId, "a start inside a run is its child");
      assert.deepEqual(root.links, [], "a start of its own run is not linked");
      const calls = spans.filter((s) => /^tools\/call t\d$/.test(s.name));
      assert.equal(calls.length, 3);
      for (const call of calls) {
        assert.equal(call.parentSpanId, root.spanId);
        assert.equal(call.kind, 3);
        const inits = spans.filter((s) => s.name === "initialize" && s.parentSpanId === call.spanId);
        assert.equal(inits.length, 1, "the span opened inside a call is its child");
      }
      assert.deepEqual(
        sent.sort(),
        calls.map((c) => `00-${CLIENT_TRACE}-${c.spanId}-01`).sort(),
        "each call's traceparent names its own span",
      );
    });
  } finally {
    await receiver.close();
  }
});

test("a client's context that is invalid starts a trace of its own; one not sampled records nothing but travels on", async () => {
  const receiver = await startOtlpReceiver();
  try {
    await traced(receiver, async () => {
      for (
        const traceparent of [
          "00-zz-00f067aa0ba902b7-01",
          `00-${"0".repeat(32)}-${CLIENT_SPAN}-01`,
          "x".repeat(100),
        ]
      ) {
        const scope: LogScope = { requestId: "bad" };
        const run = startRunSpan(scope, { "codemode.session": "bad" }, { meta: { traceparent } });
        assert.ok(run.recording);
        assert.notEqual(run.traceId, CLIENT_TRACE);
        run.end();
      }
      const scope: LogScope = { requestId: "unsampled" };
      const run = startRunSpan(scope, {}, { meta: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-00` } });
      assert.equal(run.recording, false);
      const out = await withLogScope(
        scope,
        () => inSpan("tools/call x", {}, (span) => Promise.resolve(span.context())),
      );
      assert.match(out?.traceparent ?? "", new RegExp(`^00-${CLIENT_TRACE}-[0-9a-f]{16}-00$`));
      run.end();
    });
    const spans = await receiver.waitFor((all) => all.length >= 3 ? all : []);
    assert.ok(spans.every((s) => s.parentSpanId === "" && s.traceId !== CLIENT_TRACE), JSON.stringify(spans));
  } finally {
    await receiver.close();
  }
});

test("a frame reader's stale context does not parent another run's calls; a prewarmed start is linked", async () => {
  const receiver = await startOtlpReceiver();
  try {
    await traced(receiver, async () => {
      // A sandbox prewarmed outside any run: a trace of its own.
      const prewarm = startSpan("sandbox.start", {});
      prewarm.end();
      const first: LogScope = { requestId: "a" };
      const second: LogScope = { requestId: "b" };
      const runA = startRunSpan(first, {});
      const runB = startRunSpan(second, {});
      // The reader started during run A's tool call, so it carries A's context along...
      let reader!: () => Promise<void>;
      await withLogScope(first, () =>
        inSpan("tools/call a", {}, () => {
          reader = () => withLogScope(second, () => inSpan("tools/call b", {}, () => Promise.resolve()));
          return Promise.resolve();
        }));
      // ...and serves run B's call later, re-entering B's scope: B's run is the parent.
      await reader();
      withLogScope(second, () => noteRunSandbox({}, prewarm));
      runA.end();
      runB.end();
      const spans = await receiver.waitFor((all) => all.length >= 5 ? all : []);
      const span = (name: string) => spans.find((s) => s.name === name)!;
      const [rootA, rootB] = spans.filter((s) => s.name === "tools/call run_python");
      assert.notEqual(rootA.traceId, rootB.traceId);
      const b = span("tools/call b");
      assert.equal(b.traceId, runB.traceId);
      assert.ok([rootA.spanId, rootB.spanId].includes(b.parentSpanId));
      assert.equal(b.parentSpanId, spans.find((s) => s.traceId === runB.traceId && !s.parentSpanId)!.spanId);
      const start = span("sandbox.start");
      assert.equal(start.parentSpanId, "", "a prewarmed start is a trace of its own");
      const linked = spans.find((s) => s.traceId === runB.traceId && !s.parentSpanId)!;
      assert.deepEqual(linked.links, [{ traceId: start.traceId, spanId: start.spanId }]);
    });
  } finally {
    await receiver.close();
  }
});

test("errors: status and an exception event, redacted and clipped; content only when asked for", async () => {
  const receiver = await startOtlpReceiver();
  try {
    for (const content of [false, true]) {
      await traced(receiver, async () => {
        await inSpan(`fails ${content}`, {}, async (span) => {
          span.content("codemode.code", () => `print("${SECRET}")`);
          await Promise.resolve();
          throw new Error(`upstream said ${SECRET} ${"x".repeat(2000)}`);
        }).catch(() => {});
        await inSpan(`isError ${content}`, {}, (span) => {
          span.failWith("tool_error", `the tool said ${SECRET}`);
          return Promise.resolve();
        });
      }, { content });
    }
    const spans = await receiver.waitFor((all) => all.length >= 4 ? all : []);
    const failed = spans.find((s) => s.name === "fails false")!;
    assert.equal(failed.status.code, 2);
    assert.ok(failed.status.message.startsWith("upstream said [redacted]"));
    assert.ok(failed.status.message.length <= 300);
    assert.equal(failed.events[0].name, "exception");
    assert.equal(failed.events[0].attributes["exception.type"], "Error");
    assert.equal(failed.attributes["error.type"], "Error");
    assert.equal(failed.attributes["codemode.code"], undefined, "no content by default");
    const isError = spans.find((s) => s.name === "isError false")!;
    assert.equal(isError.attributes["error.type"], "tool_error");
    assert.equal(isError.status.message, "", "a tool's own error text is content");
    const withContent = spans.find((s) => s.name === "fails true")!;
    assert.equal(withContent.attributes["codemode.code"], 'print("[redacted]")');
    assert.equal(spans.find((s) => s.name === "isError true")!.status.message, "the tool said [redacted]");
    const raw = receiver.bodies.map((b) => new TextDecoder().decode(b)).join("\n");
    assert.ok(!raw.includes(SECRET), "no configured secret reaches the collector");
  } finally {
    await receiver.close();
  }
});

test("a collector that is down: runs go on, one warning (not one per export), each failure at debug", async () => {
  const lines: Record<string, unknown>[] = [];
  setLogLevel("debug");
  setLogSink((line) => lines.push(JSON.parse(line)));
  // The exporter reads its timeout from the process's environment, as OpenTelemetry's exporters do.
  process.env.OTEL_EXPORTER_OTLP_TIMEOUT = "200";
  try {
    // Nothing listens on port 1 of the loopback.
    await traced("http://127.0.0.1:1/v1/traces", async () => {
      for (let i = 0; i < 4; i++) {
        await inSpan("work", {}, () => Promise.resolve());
        const until = Date.now() + 5_000;
        while (lines.filter((l) => l.msg === "trace export failed").length <= i && Date.now() < until) {
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      assert.equal(exportStatus()?.failed, 4);
      assert.match(exportStatus()?.error ?? "", /ECONNREFUSED/);
    });
  } finally {
    delete process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
    setLogLevel("warn");
    setLogSink((line) => process.stderr.write(line + "\n"));
  }
  assert.equal(lines.filter((l) => l.msg === "trace export failed").length, 4);
  const warnings = lines.filter((l) => l.level === "warn");
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  assert.match(String(warnings[0].msg), /cannot be sent to the OTLP collector/);
  assert.equal(warnings[0].url, "http://127.0.0.1:1/v1/traces");
});

test("sessions: a prewarmed sandbox's start is a trace of its own, linked from its first run; a run's own start is its child; both name the isolation", async () => {
  const receiver = await startOtlpReceiver();
  // Sandboxes under gVisor (issue 26): their spans say so, whatever the runtime's name.
  const sessions = fakeSessions(Object.assign(fakeRuntime(), { isolation: "gvisor" as const }));
  try {
    await traced(receiver, async () => {
      sessions.prewarm("warm");
      await sessions.warm("warm");
      for (const key of ["warm", "cold"]) {
        const scope: LogScope = { requestId: key };
        const run = startRunSpan(scope, { "codemode.session": key });
        const result = await withLogScope(scope, () => sessions.run(key, "1 + 1", { timeout: 5 }));
        assert.equal(result.status, "ok");
        run.end();
      }
    });
    const spans = await receiver.waitFor((all) => all.length >= 4 ? all : []);
    const runOf = (key: string) =>
      spans.find((s) => s.kind === 2 && s.attributes["codemode.session"] === key)!;
    const startOf = (key: string) =>
      spans.find((s) => s.name === "sandbox.start" && s.attributes["codemode.session"] === key)!;
    assert.equal(startOf("warm").parentSpanId, "");
    assert.notEqual(startOf("warm").traceId, runOf("warm").traceId);
    assert.deepEqual(runOf("warm").links, [{
      traceId: startOf("warm").traceId,
      spanId: startOf("warm").spanId,
    }]);
    assert.equal(startOf("cold").parentSpanId, runOf("cold").spanId);
    assert.deepEqual(runOf("cold").links, []);
    assert.equal(runOf("cold").attributes["codemode.runtime"], "fake");
    assert.equal(startOf("cold").attributes["codemode.runtime"], "fake");
    assert.equal(runOf("cold").attributes["codemode.isolation"], "gvisor");
    assert.equal(startOf("warm").attributes["codemode.isolation"], "gvisor");
  } finally {
    await sessions.closeAll();
    await receiver.close();
  }
});

test("doctor: tracing off, a collector that answers, one that does not (a warning with the fix)", async () => {
  const off = await checkTracing({ traceContent: false }, {});
  assert.deepEqual(off, { on: false, content: false, status: "info" });
  const receiver = await startOtlpReceiver();
  try {
    const live = await checkTracing({ otlpEndpoint: receiver.url, traceContent: true }, {});
    assert.equal(live.status, "ok");
    assert.equal(live.answered, true);
    assert.equal(live.url, `${receiver.url}/v1/traces`);
    assert.equal(live.from, "CODEMODE_OTLP_ENDPOINT");
    assert.equal(receiver.requests, 1);
    assert.equal(receiver.spans.length, 0, "the probe stores nothing");
  } finally {
    await receiver.close();
  }
  const dead = await checkTracing(
    { traceContent: false },
    { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://user:pw@127.0.0.1:1/v1/traces?key=k" },
    (url) => probeCollector(url, 500),
  );
  assert.equal(dead.status, "warn");
  assert.equal(dead.answered, false);
  assert.equal(dead.url, "http://127.0.0.1:1/v1/traces", "no credentials shown");
  assert.match(dead.problem?.message ?? "", /did not take an export: .*ECONNREFUSED/);
  assert.ok(!dead.problem?.message.includes("pw"));
});
