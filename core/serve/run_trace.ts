/**
 * The span of one run: a run_python call (the MCP conventions' server span, `tools/call run_python`), a
 * child of the trace context the client sent in the request's `_meta` or, over HTTP, its `traceparent`
 * header; or a `codemode run`, a child of the TRACEPARENT variable it was started with. What the run was
 * (session, node, code size) and how it ended (status, output size, tool calls); the code's text only
 * under CODEMODE_TRACE_CONTENT=1.
 * @module
 */
import type { ServerContext } from "@modelcontextprotocol/server";
import type { RunResult } from "../contracts/output.ts";
import type { LogScope } from "../observe/log.ts";
import {
  ATTR,
  NO_SPAN,
  runToolCalls,
  type SpanAttributes,
  startRunSpan,
  type TraceContext,
  type TraceSpan,
  tracingOn,
} from "../observe/trace.ts";

/** What a run's span starts from: its code and session, and the trace context its caller sent. */
export interface RunTraceInput {
  code: string;
  session: string;
  /** `codemode run`'s span is named so; a run_python call's is `tools/call run_python`. */
  name?: string;
  attributes?: SpanAttributes;
  client?: { meta?: TraceContext; header?: TraceContext };
}

/** Starts the span of the run served in `scope` (its log lines then carry the trace id). */
export function traceRun(scope: LogScope, run: RunTraceInput): TraceSpan {
  if (!tracingOn()) return NO_SPAN;
  const span = startRunSpan(
    scope,
    {
      ...run.attributes,
      "codemode.session": run.session,
      "codemode.request_id": scope.requestId,
      "codemode.code.size": run.code.length,
    },
    run.client,
    run.name,
  );
  span.content("codemode.code", () => run.code);
  return span;
}

/** What an MCP request says about its run's span: the MCP attributes, the `_meta` and HTTP trace context. */
export function requestTrace(ctx: ServerContext): Pick<RunTraceInput, "attributes" | "client"> {
  if (!tracingOn()) return {};
  const headers = ctx.http?.req?.headers;
  return {
    attributes: {
      [ATTR.mcpMethod]: "tools/call",
      [ATTR.tool]: "run_python",
      [ATTR.operation]: "execute_tool",
      [ATTR.jsonrpcId]: String(ctx.mcpReq.id),
      [ATTR.mcpSession]: ctx.sessionId,
      [ATTR.transport]: ctx.http ? "tcp" : "pipe",
    },
    client: {
      meta: traceContext(ctx.mcpReq._meta?.traceparent, ctx.mcpReq._meta?.tracestate),
      header: traceContext(headers?.get("traceparent"), headers?.get("tracestate")),
    },
  };
}

/** The trace context a process was started in (TRACEPARENT, TRACESTATE), as CI systems pass it on. */
export function environmentTrace(env: Record<string, string | undefined>): TraceContext | undefined {
  return traceContext(env.TRACEPARENT, env.TRACESTATE);
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
