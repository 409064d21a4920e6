/**
 * The output-schema check `Client.callTool` makes, for calls that take the lean path (lean_calls.ts):
 * a tool that declares an `outputSchema` must return `structuredContent` that matches it, unless the
 * result is an error. Same engine (the SDK's Ajv provider, its default on Node, Deno and Bun), same
 * errors, same messages; each tool's schema is compiled once per listing.
 * @module
 */
import {
  type CallToolResult,
  ProtocolError,
  ProtocolErrorCode,
  type Tool,
} from "@modelcontextprotocol/client";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/client/validators/ajv";

type Check = (value: unknown) => { valid: boolean; errorMessage?: string };

let engine: AjvJsonSchemaValidator | undefined;
/** Compiled schemas by the listed tool they belong to: a new listing compiles afresh. */
const compiled = new WeakMap<Tool, Check | Error>();

/** Throws the SDK client's `ProtocolError` when `result` does not satisfy `tool`'s outputSchema. */
export function checkOutputSchema(tool: Tool | undefined, result: CallToolResult): void {
  if (!tool?.outputSchema || result.isError) return;
  const check = checkerOf(tool);
  if (check instanceof Error) {
    const message = check.message.slice(0, 200);
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Tool '${tool.name}' has an invalid outputSchema: ${message}`,
    );
  }
  if (result.structuredContent === undefined) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidRequest,
      `Tool ${tool.name} has an output schema but did not return structured content`,
    );
  }
  let verdict: ReturnType<Check>;
  try {
    verdict = check(result.structuredContent);
  } catch (error) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Failed to validate structured content: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (!verdict.valid) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Structured content does not match the tool's output schema: ${verdict.errorMessage}`,
    );
  }
}

function checkerOf(tool: Tool): Check | Error {
  let check = compiled.get(tool);
  if (!check) {
    try {
      engine ??= new AjvJsonSchemaValidator();
      check = engine.getValidator(tool.outputSchema as never) as Check;
    } catch (error) {
      check = error instanceof Error ? error : new Error(String(error));
    }
    compiled.set(tool, check);
  }
  return check;
}
