/**
 * An MCP server (v2 server SDK, stdio) whose one tool answers with the JSON text it is given, for the
 * tests of how faithfully values reach sandbox code.
 *
 *   reflect(json, mode="text")        the text as the result's only text item
 *   reflect(json, mode="structured")  the text as the result's structuredContent, written into the reply
 *                                     by hand, byte for byte (the SDK would re-serialise it: 5.0 -> 5)
 *
 * Run: `deno run -A tests/testdata/servers/reflect_server.ts`
 * @module
 */
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import process from "node:process";
import * as z from "zod";

const server = new McpServer({ name: "reflect", version: "1.0.0" });
server.registerTool(
  "reflect",
  {
    description: "Answers with the given JSON text, as text or as structured content",
    inputSchema: z.object({ json: z.string(), mode: z.enum(["text", "structured"]).default("text") }),
  },
  ({ json, mode }, ctx) => {
    if (mode === "text") return { content: [{ type: "text" as const, text: json }] };
    const id = JSON.stringify(ctx.mcpReq.id);
    process.stdout.write(`{"jsonrpc":"2.0","id":${id},"result":{"content":[],"structuredContent":${json}}}\n`);
    // The reply is out; the SDK must not send a second one.
    return new Promise<never>(() => {});
  },
);
await server.connect(new StdioServerTransport());
