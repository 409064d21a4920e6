/**
 * The span of one run_python call (the MCP conventions' server span, `tools/call run_python`): a child of
 * the trace context the client sent in the request's `_meta` or, over HTTP, its `traceparent` header;
 * what the run was (session, node, code size) and how it ended (status, output size, tool calls). The
 * code's text only under CODEMODE_TRACE_CONTENT=1.
 * @module
 */
import type { ServerContext } from "@modelcontextprotocol/server";
import type { RunResult } from "../contracts/output.ts";
import type { LogScope } from "../observe/log.ts";
import {
  ATTR,
  NO_SPAN,
  runToolCalls,
  startRunSpan,
  type TraceContext,
  type TraceSpan,
  tracingOn,
} from "../observe/trace.ts";

/** Starts the span of the run served in `scope` (its log lines then carry the trace id). */
export function traceRun(scope: LogScope, ctx: ServerContext, session: string, code: string): TraceSpan {
  if (!tracingOn()) return NO_SPAN;
  const headers = ctx.http?.req?.headers;
  const span = startRunSpan(scope, {
    [ATTR.mcpMethod]: "tools/call",
    [ATTR.tool]: "run_python",
    [ATTR.operation]: "execute_tool",
    [ATTR.jsonrpcId]: String(ctx.mcpReq.id),
    [ATTR.mcpSession]: ctx.sessionId,
    [ATTR.transport]: ctx.http ? "tcp" : "pipe",
    "codemode.session": session,
    "codemode.request_id": scope.requestId,
    "codemode.code.size": code.length,
  }, {
    meta: traceContext(ctx.mcpReq._meta?.traceparent, ctx.mcpReq._meta?.tracestate),
    header: traceContext(headers?.get("traceparent"), headers?.get("tracestate")),
  });
  span.content("codemode.code", () => code);
  return span;
}

/** Records how the run ended; a run that did not end ok is an error with its last line as the message. */
export function traceRunEnd(span: TraceSpan, scope: LogScope, result: RunResult): void {
  if (!span.recording) return;
  span.set({
    "codemode.run.status": result.status,
    "codemode.output.size": result.stdout.length + result.stderr.length,
    "codemode.tool_calls": runToolCalls(scope),
    "codemode.session_lost": result.sessionLost || undefined,
  });
  if (result.status === "ok") return;
  // "Traceback ...\nValueError: boom": the exception's own line, not the code the traceback quotes.
  const line = (result.error ?? "").trim().split("\n").pop() || result.status;
  const type = /^([A-Za-z_][\w.]*)(?::|$)/.exec(line)?.[1] ?? result.status;
  span.fail(Object.assign(new Error(line), { name: type }), "tool_error");
}

/** A trace context from what a client sent, if it sent strings (the propagator validates them). */
function traceContext(traceparent: unknown, tracestate: unknown): TraceContext | undefined {
  if (typeof traceparent !== "string" || traceparent.length > 128) return undefined;
  return typeof tracestate === "string" && tracestate.length <= 512
    ? { traceparent, tracestate }
    : { traceparent };
}
