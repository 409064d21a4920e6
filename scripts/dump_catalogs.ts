/**
 * Dumps the tool lists of the reference MCP servers in node_modules into tests/testdata/catalogs/, so the
 * search tests and the weight measurement run on real tool docs without starting servers.
 * Run: `deno run -A scripts/dump_catalogs.ts`
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const sandboxDir = await mkdtemp(join(tmpdir(), "codemode-dump-"));

/** The servers whose tool lists become test data, with the arguments they need to start. */
const servers: Record<string, string[]> = {
  everything: ["node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"],
  filesystem: ["node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", sandboxDir],
  memory: ["node_modules/@modelcontextprotocol/server-memory/dist/index.js"],
};

for (const [name, args] of Object.entries(servers)) {
  const transport = new StdioClientTransport({
    command: "node",
    args: args.map((a) => a.startsWith("node_modules/") ? join(root, a) : a),
    env: { PATH: process.env.PATH ?? "", MEMORY_FILE_PATH: join(sandboxDir, "memory.jsonl") },
    stderr: "ignore",
  });
  const client = new Client({ name: "codemode-dump", version: "0.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  await client.close();
  const file = join(root, "tests/testdata/catalogs", `${name}.json`);
  await writeFile(file, JSON.stringify({ server: name, tools }, null, 2) + "\n");
  console.log(`${name}: ${tools.length} tools -> ${file}`);
}
