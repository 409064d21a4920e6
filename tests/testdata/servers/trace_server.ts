/**
 * An MCP server (v2 server SDK, stdio) that records the `_meta` of every tools/call it receives, as an
 * instrumented server would read its parent trace context from it. Used by the tracing tests.
 *
 * Run: `deno run -A tests/testdata/servers/trace_server.ts` with META_FILE set to the file each call's
 * record is appended to (one JSON line: {tool, meta, args}); TRACE_SECRET is a configured secret.
 *
 * Tools:
 *   wait(text, ms)    waits `ms` milliseconds, then returns `text`
 *   guarded(text)     returns `text` (the tests make it need an approval)
 *   leak()            fails with a message that quotes TRACE_SECRET (codemode must redact it)
 * @module
 */
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { appendFileSync } from "node:fs";
import process from "node:process";
import * as z from "zod";

const file = process.env.META_FILE;
if (!file) {
  process.stderr.write("trace_server: set META_FILE to the file calls are recorded in\n");
  process.exit(2);
}

const record = (tool: string, meta: unknown, args: unknown) =>
  appendFileSync(file, JSON.stringify({ tool, meta: meta ?? null, args }) + "\n");
const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] });

const server = new McpServer({ name: "trace", version: "1.0.0" });
server.registerTool(
  "wait",
  {
    description: "Waits, then echoes",
    inputSchema: z.object({ text: z.string(), ms: z.number() }).passthrough(),
    annotations: { readOnlyHint: true },
  },
  async (args, ctx) => {
    record("wait", ctx.mcpReq._meta, args);
    await new Promise((resolve) => setTimeout(resolve, args.ms));
    return text(args.text);
  },
);
server.registerTool(
  "guarded",
  { description: "Echoes, once someone allowed it", inputSchema: z.object({ text: z.string() }) },
  (args, ctx) => {
    record("guarded", ctx.mcpReq._meta, args);
    return text(args.text);
  },
);
server.registerTool(
  "leak",
  { description: "Fails quoting a secret", inputSchema: z.object({}), annotations: { readOnlyHint: true } },
  (args, ctx) => {
    record("leak", ctx.mcpReq._meta, args);
    throw new Error(`backend refused token ${process.env.TRACE_SECRET}`);
  },
);
await server.connect(new StdioServerTransport());
