/**
 * A tool's result on its way to Python. The host does not unwrap results: it passes the server's
 * response through as the server wrote it, and the sandbox (sandbox/codemode_runtime/tool_results.py)
 * decodes and unwraps it with `json.loads`, so values reach user code exactly as the server sent them
 * (structured content when present, else the text, JSON-decoded when it is JSON, else the content items;
 * binary content as bytes). The host keeps back only what Python must not get: a result flagged
 * `isError` (its text already redacted) raises ToolError, and a result nested too deeply for Python's
 * JSON decoder is refused.
 * @module
 */
import type { CallToolResult } from "@modelcontextprotocol/client";
import type { ToolReply } from "../upstream/lean_calls.ts";
import { RpcError } from "./rpc.ts";

/** Deepest value sent to the sandbox; CPython's json decoder gives up near its recursion limit (1000). */
export const MAX_VALUE_DEPTH = 500;

/** The tool reported a failure (`isError: true`); the message is the server's own text. */
export class ToolError extends Error {
  /** The result as the server sent it. */
  readonly result: CallToolResult;

  constructor(message: string, result: CallToolResult) {
    super(message);
    this.name = "ToolError";
    this.result = result;
  }
}

/**
 * A tool's reply as an `rpc_result` frame carries it: the server's JSON-RPC response text, spliced into
 * the frame as it is, for Python to unwrap (or to return whole, with `raw`).
 */
export class ToolResultReply {
  /** `json` is one JSON-RPC response whose `result` member is a checked CallToolResult. */
  constructor(readonly json: string, readonly raw: boolean) {}
}

/**
 * What Python gets for a tool's reply: the reply itself, passed through (the response text the lean path
 * kept, else the result serialised). Throws ToolError for an `isError` result unless `raw` asks for the
 * whole result, and a ToolError for Python for a result nested deeper than its JSON decoder goes.
 */
export function toolResultForPython(reply: ToolReply, raw: boolean): ToolResultReply {
  const { result } = reply;
  if (result.isError && !raw) throw new ToolError(errorText(result), result);
  if (nestingDepth(result, MAX_VALUE_DEPTH) > MAX_VALUE_DEPTH) {
    throw new RpcError(
      "ToolError",
      `The result is nested more than ${MAX_VALUE_DEPTH} levels deep, which the sandbox cannot decode; ` +
        "ask the tool for a flatter shape",
    );
  }
  return new ToolResultReply(reply.json ?? JSON.stringify({ result }), raw);
}

/** How deeply objects and arrays nest in `value`, counting stops just past `limit`. Iterative, so any depth is safe. */
export function nestingDepth(value: unknown, limit = Infinity): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== "object") continue;
    if (depth > deepest) deepest = depth;
    if (deepest > limit) return deepest;
    for (const child of Object.values(node)) {
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return deepest;
}

type Item = Record<string, unknown> & { type?: unknown };

function errorText(result: CallToolResult): string {
  const texts = ((result.content ?? []) as Item[])
    .filter((item) => item.type === "text" && typeof item.text === "string")
    .map((item) => item.text as string);
  if (texts.length) return texts.join("\n");
  if (result.structuredContent) return JSON.stringify(result.structuredContent).slice(0, 2000);
  return "The tool reported an error without a message";
}
