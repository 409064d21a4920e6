/**
 * Traces end to end: a real `codemode serve --http` (embedded Pyodide runtime) exporting with the real
 * OpenTelemetry exporter to a real OTLP/HTTP receiver, SDK clients that send a `traceparent` in `_meta` or
 * as an HTTP header and answer approval questions, and a test MCP server that records the `_meta` of every
 * call it gets. Checked: the tree of a run (run → sandbox start, gathered tool calls as overlapping
 * siblings, the approval wait under its call), the trace continued from the client and into the server,
 * sandbox code unable to choose the context sent upstream, catalog indexing and the upstream start in a
 * trace of their own, the trace id in the run's log lines, no secret and no code in any span; then a
 * collector that is down: runs unaffected, one warning.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { ROOT } from "./_serve.ts";
import { connectHttp, type HttpClient, type HttpServe, startHttpServe } from "./_serve_http.ts";
import { askingClient, reply } from "./_approvals.ts";
import { type ReceivedSpan, startOtlpReceiver } from "./_otlp_receiver.ts";

const usable = (await pyodide().detect()).available;
if (!usable) console.warn("IGNORED tracing suite: deno or the Pyodide package is missing");

const SECRET = `trace-secret-${crypto.randomUUID()}`;
const CODE_MARKER = `code-marker-${crypto.randomUUID()}`;
const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c";
const HEADER_SPAN = "b7ad6b7169203331";
const FORGED = `00-${"f".repeat(32)}-${"e".repeat(16)}-01`;
/** The fleet node the serve says it is (CODEMODE_NODE_ID). */
const NODE = "trace-node-7";

/** A HOME whose only server is the trace server (its env holds the secret). */
function traceHome(): { home: string; metaFile: string } {
  const home = mkdtempSync(join(tmpdir(), "codemode-trace-"));
  const metaFile = join(home, "meta.jsonl");
  mkdirSync(join(home, "MCPs"));
  const trace = {
    command: join(ROOT, "node_modules/.bin/deno"),
    args: ["run", "-A", "--quiet", join(ROOT, "tests/testdata/servers/trace_server.ts")],
    env: { META_FILE: metaFile, TRACE_SECRET: SECRET },
  };
  writeFileSync(join(home, "MCPs", "servers.json"), JSON.stringify({ mcpServers: { trace } }));
  return { home, metaFile };
}

/** What the trace server received: one record per call. */
function received(
  metaFile: string,
): { tool: string; meta: Record<string, unknown> | null; args: Record<string, unknown> }[] {
  if (!existsSync(metaFile)) return [];
  return readFileSync(metaFile, "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line));
}

/** Log lines a serve wrote on stderr. */
function logLines(serve: HttpServe): Record<string, unknown>[] {
  return serve.stderr().split("\n").flatMap((line) => {
    try {
      return [JSON.parse(line)];
    } catch {
      return [];
    }
  });
}

/** Calls run_python with `_meta` of the client's choosing. */
async function runWithMeta(c: HttpClient, code: string, meta: Record<string, string>) {
  const r = await c.client.callTool(
    { name: "run_python", arguments: { code, timeout: 60 }, _meta: meta },
    { timeout: 180_000 },
  );
  return { isError: Boolean(r.isError), structured: (r.structuredContent ?? {}) as Record<string, unknown> };
}

/** A test of this suite: skipped without Pyodide; serves and receivers outlive no test. */
const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });

const overlap = (spans: ReceivedSpan[]) =>
  Math.max(...spans.map((s) => s.start)) < Math.min(...spans.map((s) => s.end));

test("a run is one trace: continued from the client, into the upstream server, and nothing sandbox code sends", async () => {
  const receiver = await startOtlpReceiver();
  const { home, metaFile } = traceHome();
  const served = await startHttpServe(home, {
    CODEMODE_RUNTIME: "pyodide",
    CODEMODE_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: "100",
    CODEMODE_CONFIRM_TOOLS: "trace/guarded",
    CODEMODE_PREWARM: "off",
    CODEMODE_LOG_LEVEL: "info",
    CODEMODE_NODE_ID: NODE,
  });
  const asking = askingClient("tracing-tests", reply.approve());
  const viaMeta = await connectHttp(served.url, {}, asking.client);
  const viaHeader = await connectHttp(served.url, {
    traceparent: `00-${HEADER_TRACE}-${HEADER_SPAN}-01`,
  }, new Client({ name: "tracing-header", version: "1" }));
  try {
    const code = `# ${CODE_MARKER}
import asyncio
from codemode_runtime import context as _context
gathered = await asyncio.gather(
    mcp_trace.wait(text="a", ms=400),
    mcp_trace.wait(text="b", ms=400),
    mcp_trace.guarded(text="c"),
)
# Sandbox code tries to choose the trace context sent upstream: in the arguments, and in the call's params.
await mcp_trace.wait(text="d", ms=1, _meta={"traceparent": "${FORGED}"}, traceparent="${FORGED}")
await _context.current().rpc.call("call_tool", {"server": "trace", "tool": "wait",
    "arguments": {"text": "e", "ms": 1}, "_meta": {"traceparent": "${FORGED}"},
    "meta": {"traceparent": "${FORGED}"}, "traceparent": "${FORGED}"})
try:
    await mcp_trace.leak()
except Exception as e:
    leaked = type(e).__name__
(gathered, leaked)`;
    const run = await runWithMeta(viaMeta, code, { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` });
    assert.equal(run.isError, false, JSON.stringify(run.structured));
    assert.equal(run.structured.value, "(['a', 'b', 'c'], 'ToolError')");
    assert.equal(asking.questions.length, 1, "the guarded call was asked about");

    const failing = await runWithMeta(viaMeta, `raise ValueError("the token is ${SECRET}")`, {});
    assert.equal(failing.isError, true);
    const headerRun = await viaHeader.run("1 + 1");
    assert.equal(headerRun.value, "2");
    // A plan: one question for its calls, a wait of kind "plan" in the run's trace.
    const planned = await runWithMeta(
      viaMeta,
      `from mcp import runtime\nasync with runtime.plan("traced plan"):\n    await mcp_trace.guarded(text="p")\n"done"`,
      {},
    );
    assert.equal(planned.isError, false, JSON.stringify(planned.structured));

    // The run's tree.
    const [root] = await receiver.waitFor((all) =>
      all.filter((s) => s.traceId === CLIENT_TRACE && s.kind === 2)
    );
    const inTrace = await receiver.waitFor((all) => {
      const mine = all.filter((s) => s.traceId === CLIENT_TRACE);
      return mine.filter((s) => s.name.startsWith("tools/call ") && s.kind === 3).length >= 6 &&
          mine.some((s) => s.name === "sandbox.start")
        ? mine
        : [];
    });
    assert.equal(root.name, "tools/call run_python");
    assert.equal(root.parentSpanId, CLIENT_SPAN, "the run continues the client's span");
    assert.equal(root.attributes["mcp.method.name"], "tools/call");
    assert.equal(root.attributes["gen_ai.tool.name"], "run_python");
    assert.equal(root.attributes["codemode.session"], viaMeta.sessionId());
    assert.equal(root.attributes["codemode.node"], NODE);
    assert.equal(root.resource["codemode.node"], NODE, "the resource names the fleet node too");
    assert.equal(root.attributes["codemode.runtime"], "pyodide");
    assert.equal(root.attributes["codemode.isolation"], "wasm");
    assert.equal(root.attributes["codemode.run.status"], "ok");
    assert.equal(root.attributes["codemode.code.size"], code.length);
    assert.equal(root.attributes["codemode.tool_calls"], 6);
    assert.equal(typeof root.attributes["codemode.output.size"], "number");
    assert.equal(root.attributes["codemode.code"], undefined, "no code without CODEMODE_TRACE_CONTENT");
    const start = inTrace.find((s) => s.name === "sandbox.start")!;
    assert.equal(start.parentSpanId, root.spanId, "the sandbox the run started is its child");
    const calls = inTrace.filter((s) => s.name.startsWith("tools/call ") && s.kind === 3);
    assert.equal(calls.length, 6);
    for (const call of calls) {
      assert.equal(call.parentSpanId, root.spanId, `${call.name} is a direct child of the run`);
      assert.equal(call.attributes["codemode.server"], "trace");
      assert.equal(call.attributes["gen_ai.operation.name"], "execute_tool");
      assert.equal(call.attributes["gen_ai.tool.call.arguments"], undefined);
    }
    const gathered = calls.filter((s) => s.name !== "tools/call leak").sort((a, b) => a.start - b.start)
      .slice(
        0,
        3,
      );
    assert.deepEqual(gathered.map((s) => s.name).sort(), [
      "tools/call guarded",
      "tools/call wait",
      "tools/call wait",
    ]);
    assert.ok(overlap(gathered), "gathered calls overlap in time");
    const guarded = calls.find((s) => s.name === "tools/call guarded")!;
    const [wait] = inTrace.filter((s) => s.name === "approval.wait");
    assert.equal(wait.parentSpanId, guarded.spanId, "the approval wait is under the call it is about");
    assert.equal(wait.attributes["codemode.approval.outcome"], "approved");
    const leak = calls.find((s) => s.name === "tools/call leak")!;
    assert.equal(leak.status.code, 2);
    assert.equal(leak.attributes["error.type"], "tool_error");

    // Into the upstream server: each call carried its own span's context, never what sandbox code sent.
    const all = received(metaFile);
    const records = all.filter((r) => r.args.text !== "p"); // the plan's call is another run's
    assert.equal(records.length, 6);
    for (const record of records) {
      const traceparent = String(record.meta?.traceparent);
      assert.notEqual(traceparent, FORGED);
      const [, traceId, spanId] = traceparent.split("-");
      assert.equal(traceId, CLIENT_TRACE, `${record.tool} ${JSON.stringify(record.meta)}`);
      assert.ok(calls.some((c) => c.spanId === spanId), "the parent named upstream is the call's span");
    }
    assert.equal(new Set(records.map((r) => r.meta?.traceparent)).size, 6, "one span per call");

    // The failed run: its error is on the span, the secret in it redacted.
    const [failed] = await receiver.waitFor((all) =>
      all.filter((s) => s.kind === 2 && s.attributes["codemode.run.status"] === "error")
    );
    assert.equal(failed.parentSpanId, "", "without a client context the run is a trace of its own");
    assert.equal(failed.status.code, 2);
    assert.equal(failed.attributes["error.type"], "tool_error");
    const exception = failed.events.find((e) => e.name === "exception")!;
    assert.equal(exception.attributes["exception.type"], "ValueError");
    assert.match(
      String(exception.attributes["exception.message"]),
      /^ValueError: the token is \[redacted\]/,
    );

    // The plan's question is a wait of its own kind, under its run, with how many calls it asked about.
    const [planWait] = await receiver.waitFor((all) =>
      all.filter((s) => s.name === "approval.wait" && s.attributes["codemode.approval.kind"] === "plan")
    );
    assert.equal(planWait.attributes["codemode.approval.calls"], 1);
    assert.equal(planWait.attributes["codemode.approval.outcome"], "approved");
    const [planRun] = await receiver.waitFor((all) =>
      all.filter((s) => s.kind === 2 && s.traceId === planWait.traceId)
    );
    assert.equal(planWait.parentSpanId, planRun.spanId, "a plan's question is asked by its run");
    assert.ok(
      receiver.spans.some((s) => s.traceId === planWait.traceId && s.name === "tools/call guarded"),
      "the planned call is a span of the same run",
    );
    const planCall = all.find((r) => r.args.text === "p");
    assert.equal(String(planCall?.meta?.traceparent).split("-")[1], planWait.traceId);

    // Over HTTP, the traceparent header is the parent when _meta names none.
    const [fromHeader] = await receiver.waitFor((all) =>
      all.filter((s) => s.kind === 2 && s.traceId === HEADER_TRACE)
    );
    assert.equal(fromHeader.parentSpanId, HEADER_SPAN);
    assert.equal(fromHeader.attributes["network.transport"], "tcp");

    // Catalog indexing started the server before any run: a trace of its own, the start under it.
    const [index] = await receiver.waitFor((all) => all.filter((s) => s.name === "catalog.index"));
    const listing = receiver.spans.find((s) => s.name === "catalog.list" && s.parentSpanId === index.spanId)!;
    assert.equal(listing.attributes["codemode.server"], "trace");
    const init = receiver.spans.find((s) => s.name === "initialize" && s.parentSpanId === listing.spanId)!;
    assert.equal(init.attributes["mcp.method.name"], "initialize");
    assert.equal(init.attributes["network.transport"], "pipe");

    // The run's log lines carry its trace id.
    const started = logLines(served).filter((l) => l.msg === "run_python started");
    assert.equal(started[0]?.traceId, CLIENT_TRACE);
    assert.equal(started[0]?.node, NODE, "and the node, so a fleet's logs and traces join up");
    assert.ok(started.every((l) => typeof l.traceId === "string" && l.requestId));

    // Nothing the collector got holds the secret or the code.
    const raw = receiver.bodies.map((b) => new TextDecoder("latin1").decode(b)).join("\n");
    assert.ok(!raw.includes(SECRET), "a configured secret reached the collector");
    assert.ok(!raw.includes(CODE_MARKER), "the code's text reached the collector");
    assert.equal(served.stdout(), "");
  } finally {
    await viaMeta.end().catch(() => {});
    await viaHeader.end().catch(() => {});
    await served.stop();
    await receiver.close();
  }
});

test("a collector that is down costs one warning and nothing else: runs answer as fast as with a live one", async () => {
  const receiver = await startOtlpReceiver();
  // A port nothing listens on: the receiver's, once it is closed.
  const dead = await startOtlpReceiver();
  const deadUrl = dead.url;
  await dead.close();
  const latencies = async (env: Record<string, string>) => {
    const served = await startHttpServe(traceHome().home, {
      CODEMODE_RUNTIME: "pyodide",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_EXPORTER_OTLP_TIMEOUT: "300",
      CODEMODE_LOG_LEVEL: "debug",
      ...env,
    });
    const c = await connectHttp(served.url);
    try {
      await c.run("print(1)");
      const ms: number[] = [];
      for (let i = 0; i < 12; i++) {
        const t = performance.now();
        const r = await c.run("await mcp_trace.wait(text='x', ms=1)");
        ms.push(performance.now() - t);
        assert.equal(r.value, "'x'");
        // Spaced out a little, so the batch is exported (and fails) several times meanwhile.
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
      return { ms: ms.sort((a, b) => a - b)[6], served };
    } finally {
      await c.end().catch(() => {});
      await served.stop();
    }
  };
  try {
    const live = await latencies({ CODEMODE_OTLP_ENDPOINT: receiver.url });
    const down = await latencies({ CODEMODE_OTLP_ENDPOINT: deadUrl });
    const lines = logLines(down.served);
    const failures = lines.filter((l) => l.msg === "trace export failed");
    const warnings = lines.filter((l) => l.level === "warn" && /OTLP collector/.test(String(l.msg)));
    assert.ok(failures.length >= 2, `several exports failed (${failures.length})`);
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.equal(warnings[0].url, `${deadUrl}/v1/traces`);
    // Loose on a loaded machine, but an export that blocked runs would cost its 300 ms timeout each.
    assert.ok(
      down.ms < Math.max(live.ms * 3, live.ms + 150),
      `p50 ${down.ms.toFixed(1)} ms with the collector down, ${live.ms.toFixed(1)} ms with it up`,
    );
    assert.ok(receiver.spans.length > 0, "the live serve exported its spans");
  } finally {
    await receiver.close();
  }
});

test("codemode run continues the trace a CI job passes in TRACEPARENT, and exports before it exits", async () => {
  const receiver = await startOtlpReceiver();
  const { home, metaFile } = traceHome();
  try {
    // Asynchronously: the receiver in this process must keep answering while the child runs.
    const child = spawn(join(ROOT, "node_modules/.bin/deno"), [
      "run",
      "-A",
      "--quiet",
      join(ROOT, "cli.ts"),
      "run",
      "-",
    ], {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        CODEMODE_STATE_DIR: join(home, "state"),
        CODEMODE_RUNTIME: "pyodide",
        CODEMODE_OTLP_ENDPOINT: receiver.url,
        TRACEPARENT: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
      },
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.stdin.end("await mcp_trace.wait(text='ci', ms=1)");
    const status = await new Promise((resolve) => child.once("exit", resolve));
    assert.equal(status, 0, stderr);
    // No wait: a run that ended exported its spans before the process exited.
    const run = receiver.spans.find((s) => s.name === "codemode run");
    assert.ok(run, `spans: ${receiver.spans.map((s) => s.name).join(", ")}`);
    assert.equal(run.traceId, CLIENT_TRACE);
    assert.equal(run.parentSpanId, CLIENT_SPAN);
    assert.equal(run.attributes["codemode.tool_calls"], 1);
    const call = receiver.spans.find((s) => s.name === "tools/call wait")!;
    assert.equal(call.parentSpanId, run.spanId);
    const [record] = received(metaFile);
    assert.equal(record.meta?.traceparent, `00-${CLIENT_TRACE}-${call.spanId}-01`);
  } finally {
    await receiver.close();
  }
});
