/**
 * Turning raw MCP tool results into the values agent code receives: structured content when there is
 * some, else the text (JSON-decoded when it is JSON), else the content items; binary content crosses the
 * JSON channel as `{[BYTES_MARKER]: base64, mime_type}`; `isError` results become a `ToolError`.
 * @module
 */
import { Buffer } from "node:buffer";
import type { CallToolResult } from "@modelcontextprotocol/client";

/** Binary values cross the JSON channel as `{__codemode_bytes__: base64, mime_type}`. */
export const BYTES_MARKER = "__codemode_bytes__";

/** A binary value on the host <-> sandbox channel. */
export interface BytesValue {
  [BYTES_MARKER]: string;
  mime_type: string;
}

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

/** The result is too large or too deeply nested to send to the sandbox. */
export class ResultLimitError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = "ResultLimitError";
  }
}

type Item = Record<string, unknown> & { type?: unknown };

/** Wraps base64 data as a bytes value. */
export function bytesValue(base64: string, mimeType?: string): BytesValue {
  return { [BYTES_MARKER]: base64, mime_type: mimeType ?? "application/octet-stream" };
}

/**
 * The value agent code gets from a tool call: `structuredContent` when present; else, when every item
 * is text, the text joined with newlines (JSON-decoded when it parses); else a list with text items as
 * strings, images, audio and blob resources as bytes values, and other items unchanged. No content is
 * `null`. Throws `ToolError` for `isError` results.
 */
export function unwrapToolResult(result: CallToolResult): unknown {
  if (result.isError) throw new ToolError(errorText(result), result);
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return result.structuredContent;
  }
  const content = (result.content ?? []) as Item[];
  if (content.length === 0) return null;
  if (content.every((item) => item.type === "text")) {
    return decodeJson(content.map((item) => String(item.text ?? "")).join("\n"));
  }
  return content.map((item) => {
    if (item.type === "text") return String(item.text ?? "");
    const bytes = binaryOf(item);
    return bytes ?? item;
  });
}

/** The whole result for `raw=True`: everything kept, base64 fields of binary content turned into bytes values. */
export function encodeRawResult(result: CallToolResult): Record<string, unknown> {
  const content = (result.content ?? []) as Item[];
  return {
    ...result,
    content: content.map((item) => {
      if ((item.type === "image" || item.type === "audio") && typeof item.data === "string") {
        return { ...item, data: bytesValue(item.data, item.mimeType as string | undefined) };
      }
      const resource = item.type === "resource" ? item.resource as Item | undefined : undefined;
      if (resource && typeof resource.blob === "string") {
        return {
          ...item,
          resource: { ...resource, blob: bytesValue(resource.blob, resource.mimeType as string) },
        };
      }
      return item;
    }),
  };
}

/** Serialises a value for the sandbox, refusing with a clear message what it could not take. */
export function encodeWithinLimits(
  value: unknown,
  options: { maxBytes: number; maxDepth?: number; label: string },
): string {
  const maxDepth = options.maxDepth ?? 500;
  const depth = nestingDepth(value, maxDepth);
  if (depth > maxDepth) {
    throw new ResultLimitError(
      `The result of ${options.label} is nested more than ${maxDepth} levels deep, which the sandbox cannot ` +
        `decode; ask the tool for a flatter shape or use raw=True on a narrower call`,
    );
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new ResultLimitError(
      `The result of ${options.label} cannot be serialised: ${(error as Error).message}`,
    );
  }
  json ??= "null";
  const bytes = Buffer.byteLength(json);
  if (bytes > options.maxBytes) {
    throw new ResultLimitError(
      `The result of ${options.label} is ${mib(bytes)} MiB, over the ${mib(options.maxBytes)} MiB limit; ` +
        `ask the tool for less (a page, a filter, a smaller range)`,
    );
  }
  return json;
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

function binaryOf(item: Item): BytesValue | undefined {
  if ((item.type === "image" || item.type === "audio") && typeof item.data === "string") {
    return bytesValue(item.data, item.mimeType as string | undefined);
  }
  const resource = item.type === "resource" ? item.resource as Item | undefined : undefined;
  if (resource && typeof resource.blob === "string") {
    return bytesValue(resource.blob, resource.mimeType as string);
  }
  return undefined;
}

function errorText(result: CallToolResult): string {
  const texts = ((result.content ?? []) as Item[])
    .filter((item) => item.type === "text" && typeof item.text === "string")
    .map((item) => item.text as string);
  if (texts.length) return texts.join("\n");
  if (result.structuredContent) return JSON.stringify(result.structuredContent).slice(0, 2000);
  return "The tool reported an error without a message";
}

/** Where JSON text can start; anything else is plain text, known without paying for a thrown SyntaxError. */
const JSON_START = /^\s*[{["\-\d]|^\s*(?:true|false|null)\s*$/;

function decodeJson(text: string): unknown {
  if (!JSON_START.test(text)) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}
