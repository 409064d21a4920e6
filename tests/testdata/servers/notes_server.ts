/**
 * An MCP server (v2 server SDK, stdio) whose tools carry no annotations, as many servers' tools don't:
 * by the spec's defaults each may be destructive. Used by the approval and dry-run tests.
 *
 * Run: `deno run -A tests/testdata/servers/notes_server.ts` with NOTES_FILE set to the file `add_note`
 * appends to (one line per note).
 *
 * Tools (none annotated):
 *   add_note(text)  appends a line to NOTES_FILE; returns {count, received_at}: how many notes the file
 *                   holds, and the wall clock (ms since the epoch, sub-ms precision) when the call arrived
 *   count_notes()   returns {count, received_at}
 * @module
 */
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import process from "node:process";
import * as z from "zod";

const file = process.env.NOTES_FILE;
if (!file) {
  process.stderr.write("notes_server: set NOTES_FILE to the file notes are appended to\n");
  process.exit(2);
}

const count = () => existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).length : 0;
const json = (value: unknown) => ({
  content: [{ type: "text" as const, text: JSON.stringify(value) }],
  structuredContent: value as Record<string, unknown>,
});

const server = new McpServer({ name: "notes", version: "1.0.0" });
server.registerTool(
  "add_note",
  { description: "Appends a note to the notes file", inputSchema: z.object({ text: z.string() }) },
  ({ text }) => {
    const received = performance.timeOrigin + performance.now();
    appendFileSync(file, text.replaceAll("\n", " ") + "\n");
    return json({ count: count(), received_at: received });
  },
);
server.registerTool(
  "count_notes",
  { description: "How many notes the file holds", inputSchema: z.object({}) },
  () => json({ count: count(), received_at: performance.timeOrigin + performance.now() }),
);
await server.connect(new StdioServerTransport());
