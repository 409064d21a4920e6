/**
 * The `tools/call` handler of codemode's MCP server. McpServer's own handler never shows a tool the
 * call's `task` parameter, so codemode serves `tools/call` itself, as McpServer does (an unknown tool is
 * a protocol error; arguments that do not fit the tool's schema and errors it throws are tool errors; the
 * result is projected for the negotiated protocol version), and starts a task-augmented call of a tool
 * that supports tasks as a task.
 * The tools are still registered with McpServer, which lists them.
 * @module
 */
import {
  type CallToolResult,
  type McpServer,
  ProtocolError,
  ProtocolErrorCode,
  type ServerContext,
} from "@modelcontextprotocol/server";
import type * as z from "zod";

/** A tool codemode serves. */
export interface ServedTool<T extends z.ZodType = z.ZodType> {
  /** Its arguments' schema (the one registered with McpServer). */
  input: T;
  /** Runs the tool. */
  call(args: z.output<T>, ctx: ServerContext): Promise<CallToolResult>;
  /** Starts the tool as a task and returns the CreateTaskResult; absent: the tool has no task support. */
  task?(args: z.output<T>, ctx: ServerContext, ttl: number | undefined): CallToolResult;
}

/** Serves `tools/call` for `tools` on `server` (replacing McpServer's handler; call after registerTool). */
export function serveToolCalls(server: McpServer, tools: Record<string, ServedTool>): void {
  server.server.removeRequestHandler("tools/call");
  server.server.setRequestHandler("tools/call", async (request, ctx) => {
    const { name, arguments: args } = request.params;
    const tool = Object.hasOwn(tools, name) ? tools[name] : undefined;
    if (!tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${name} not found`);
    // As McpServer: arguments that do not fit, and errors the tool throws, come back as tool errors.
    const parsed = tool.input.safeParse(args ?? {});
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "arguments"}: ${i.message}`);
      return toolError(`Input validation error: Invalid arguments for tool ${name}: ${issues.join(", ")}`);
    }
    const task = taskParams(request.params);
    if (task && tool.task) return tool.task(parsed.data, ctx, task.ttl);
    try {
      return server.server.projectCallToolResult(await tool.call(parsed.data, ctx), undefined);
    } catch (error) {
      return toolError((error as Error)?.message ?? String(error));
    }
  });
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}

/** The `task` a 2025-11-25 client puts on a call it wants run as a task, if any. */
function taskParams(params: unknown): { ttl?: number } | undefined {
  const task = (params as { task?: unknown }).task;
  if (!task || typeof task !== "object" || Array.isArray(task)) return undefined;
  const ttl = (task as { ttl?: unknown }).ttl;
  return typeof ttl === "number" && Number.isFinite(ttl) && ttl > 0 ? { ttl } : {};
}
