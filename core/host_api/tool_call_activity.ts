/**
 * The activity event of one tool call made by sandbox code: which server and tool, the arguments with
 * the server's secrets (and secret-named keys) redacted, the size of the result, the latency and the
 * error. Built only while someone listens to the activity record (a serving process publishes it). The
 * result's part of the call's span, likewise only while tracing is on.
 * @module
 */
import type { CallToolResult } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { activity } from "../observe/activity.ts";
import { redactArguments, secretsOf } from "../upstream/redact.ts";
import { ATTR, type TraceSpan } from "../observe/trace.ts";

/** One call as it was asked for, and resolved so far. */
export interface ToolCallRecord {
  /** The run that made the call. */
  run?: string;
  server: string;
  tool: string;
  args: unknown;
  /** The server's configuration, whose secrets are redacted from the arguments. */
  spec?: ServerSpec;
  /** `performance.now()` when the call was asked for. */
  started: number;
}

const secretsBySpec = new WeakMap<ServerSpec, string[]>();

/** Records the call's event with its result or its error; no-op while nobody listens. */
export function recordToolCall(
  call: ToolCallRecord,
  end: { result?: CallToolResult; error?: unknown },
): void {
  if (!activity.enabled) return;
  let secrets: string[] = [];
  if (call.spec) {
    secrets = secretsBySpec.get(call.spec) ?? secretsOf(call.spec);
    secretsBySpec.set(call.spec, secrets);
  }
  const failed = end.error !== undefined;
  activity.record({
    kind: "tool.call",
    ...(call.run ? { run: call.run } : {}),
    server: call.server,
    tool: call.tool,
    args: redactArguments(call.args, secrets),
    ...(end.result ? { resultBytes: resultSize(end.result) } : {}),
    ms: Math.round((performance.now() - call.started) * 100) / 100,
    outcome: failed ? "error" : end.result?.isError ? "tool_error" : "ok",
    ...(failed ? { error: (end.error as Error)?.message ?? String(end.error) } : {}),
  });
}

/** A result on its call's span: its size; `isError` makes the span an error (the tool's text is content). */
export function traceToolResult(span: TraceSpan, result: CallToolResult): void {
  if (!span.recording) return;
  span.set({ "codemode.result.size": resultSize(result) });
  span.content(ATTR.toolResult, () => result.structuredContent ?? result.content);
  if (!result.isError) return;
  const text = (result.content ?? []).find((item) => item.type === "text") as { text?: string } | undefined;
  span.failWith("tool_error", text?.text);
}

/** About how many characters a result carries: its texts, encoded data and structured content. */
export function resultSize(result: CallToolResult): number {
  let size = 0;
  for (const item of result.content ?? []) {
    const any = item as { text?: unknown; data?: unknown; resource?: { text?: unknown; blob?: unknown } };
    if (typeof any.text === "string") size += any.text.length;
    if (typeof any.data === "string") size += any.data.length;
    if (typeof any.resource?.text === "string") size += any.resource.text.length;
    if (typeof any.resource?.blob === "string") size += any.resource.blob.length;
  }
  if (result.structuredContent !== undefined) size += JSON.stringify(result.structuredContent)?.length ?? 0;
  return size;
}
