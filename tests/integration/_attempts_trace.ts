/**
 * Trace context attempts of the adversarial suite, whose serve exports its traces to a collector of the
 * suite's own: sandbox code tries to choose the `traceparent` a tool call carries to its server (in the
 * arguments, in the call's params, through `runtime.call_tool`, through the environment). The server (the
 * "trace" entry) records the `_meta` of each call: every one must name the host's own tool-call span.
 * @module
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { type Attempt, facts } from "./_adversarial.ts";

const FORGED_TRACE = "f".repeat(32);

/** Trace context: what goes upstream comes from the host's spans alone. */
export const tracing: Attempt[] = [
  {
    area: "tracing",
    name:
      "forging the trace context a call carries upstream (arguments, call params, runtime.call_tool, env)",
    timeout: 60,
    code: `
from codemode_runtime import context as _context
from mcp import runtime
forged = "00-${FORGED_TRACE}-" + "e" * 16 + "-01"
rpc = _context.current().rpc
await mcp_trace.wait(text="kw", ms=1, _meta={"traceparent": forged, "tracestate": "x=forged"}, traceparent=forged)
await rpc.call("call_tool", {"server": "trace", "tool": "wait", "arguments": {"text": "params", "ms": 1},
    "_meta": {"traceparent": forged}, "meta": {"traceparent": forged, "tracestate": "x=forged"},
    "traceparent": forged, "context": {"traceparent": forged}})
await runtime.call_tool("trace", "wait", {"text": "runtime", "ms": 1, "_meta": {"traceparent": forged}})
os.environ["TRACEPARENT"] = forged
await mcp_trace.wait(text="env", ms=1)
report(done=True)`,
    async check(answer, ctx) {
      assert.equal(facts(answer).done, true, answer.text.slice(0, 500));
      const file = ctx.fix.traceFile;
      const records = (existsSync(file) ? readFileSync(file, "utf8") : "").split("\n").filter(Boolean)
        .map((line) => JSON.parse(line) as { meta: Record<string, unknown> | null; args: { text?: string } })
        .filter((r) => ["kw", "params", "runtime", "env"].includes(r.args.text ?? ""));
      assert.equal(records.length, 4, "each call reached the server");
      for (const record of records) {
        const meta = JSON.stringify(record.meta);
        assert.ok(
          !meta.includes(FORGED_TRACE) && !meta.includes("x=forged"),
          `forged context upstream: ${meta}`,
        );
        const spanId = String(record.meta?.traceparent).split("-")[2];
        // The parent named upstream is a tool-call span of the host's, which the collector received.
        await ctx.fix.otlp.waitFor((spans) => spans.filter((s) => s.spanId === spanId && s.kind === 3));
      }
    },
  },
];
