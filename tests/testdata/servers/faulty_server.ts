/**
 * An MCP server (v2 server SDK, stdio) that misbehaves on demand, for the upstream pool's fault tests.
 *
 * Run: `deno run -A tests/testdata/servers/faulty_server.ts [flags]`
 *   --exit-at-start=N   write a line to stderr and exit with code N before speaking MCP
 *   --silent            never answer (keeps stdin open, never initialises)
 *   --garbage           print non-protocol lines on stdout at start-up and between replies
 *   --tools=N           register N extra tools `extra_<i>` (tool-list size and paging tests)
 *   --page-size=N       serve tools/list in pages of N tools
 *   --echo-env=NAME     write `NAME=<value>` and the command line to stderr at start-up (a server that
 *                       leaks its secrets into its own diagnostics)
 *   --flood-at-start=MB write MB megabytes to stderr before speaking MCP
 * @module
 */
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { spawn } from "node:child_process";
import process from "node:process";
import * as z from "zod";

const flags = new Map(
  process.argv.slice(2).map((arg) => {
    const [key, value = "true"] = arg.replace(/^--/, "").split("=", 2);
    return [key, value] as [string, string];
  }),
);

type Text = { type: "text"; text: string };
const text = (value: string): { content: Text[] } => ({ content: [{ type: "text", text: value }] });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const garbage = () => process.stdout.write("this is not JSON\nWARNING: still not json {\n[1,2\n42\n{}\n");

/** Writes `mb` megabytes of 1 KiB lines to stderr, waiting whenever the pipe is full. */
async function floodStderr(mb: number, char: string): Promise<void> {
  const chunk = (char.repeat(1023) + "\n").repeat(1024);
  for (let i = 0; i < mb; i++) {
    if (!process.stderr.write(chunk)) await new Promise((r) => process.stderr.once("drain", r));
  }
}

async function serve(): Promise<void> {
  const server = new McpServer({ name: "faulty", version: "1.0.0" });
  let cancellations = 0;

  server.registerTool(
    "echo",
    { description: "Echoes a message", inputSchema: z.object({ message: z.string() }) },
    ({ message }) => {
      if (flags.has("garbage")) garbage();
      return text(message);
    },
  );
  server.registerTool(
    "slow",
    { description: "Answers after a delay", inputSchema: z.object({ ms: z.number(), message: z.string() }) },
    async ({ ms, message }) => {
      await sleep(ms);
      return text(message);
    },
  );
  server.registerTool(
    "crash",
    { description: "Exits the process mid-call", inputSchema: z.object({ code: z.number().optional() }) },
    async ({ code }) => {
      await sleep(20);
      process.exit(code ?? 3);
    },
  );
  server.registerTool("hang", { description: "Never answers" }, (ctx) => {
    return new Promise(() => {
      ctx.mcpReq.signal.addEventListener("abort", () => cancellations++);
    });
  });
  server.registerTool("cancellations", { description: "How many calls were cancelled" }, () => {
    return text(String(cancellations));
  });
  server.registerTool(
    "flood_stderr",
    { description: "Writes megabytes to stderr", inputSchema: z.object({ mb: z.number() }) },
    async ({ mb }) => {
      await floodStderr(mb, "x");
      return text(`wrote ${mb} MB`);
    },
  );
  server.registerTool("garbage", { description: "Prints non-JSON lines on stdout" }, () => {
    garbage();
    return text("after garbage");
  });
  server.registerTool(
    "big",
    { description: "Returns a large text result", inputSchema: z.object({ mb: z.number() }) },
    ({ mb }) => text("y".repeat(Math.round(mb * 1024 * 1024))),
  );
  server.registerTool(
    "unknown_content",
    { description: "Returns a content type MCP does not define" },
    () => {
      return { content: [{ type: "hologram", data: "AAAA" }] } as unknown as { content: Text[] };
    },
  );
  server.registerTool(
    "deep",
    { description: "Returns deeply nested structured content", inputSchema: z.object({ depth: z.number() }) },
    ({ depth }) => {
      let value: Record<string, unknown> = { leaf: true };
      for (let i = 0; i < depth; i++) value = { n: value };
      return { content: [{ type: "text" as const, text: "deep" }], structuredContent: value };
    },
  );
  server.registerTool("mixed", { description: "Returns text, image, audio and resources" }, () => ({
    content: [
      { type: "text" as const, text: "caption" },
      { type: "image" as const, data: "aW1n", mimeType: "image/png" },
      { type: "audio" as const, data: "YXVk", mimeType: "audio/wav" },
      {
        type: "resource" as const,
        resource: { uri: "file:///b", blob: "YmxvYg==", mimeType: "application/zip" },
      },
      { type: "resource" as const, resource: { uri: "file:///t", text: "hello", mimeType: "text/plain" } },
    ],
  }));
  server.registerTool("fail", { description: "Returns an error result" }, () => ({
    content: [{ type: "text" as const, text: "the widget is broken" }],
    isError: true,
  }));
  server.registerTool(
    "forge_reply",
    {
      description: "Answers with a hand-written, invalid JSON-RPC reply, then never with a real one",
      inputSchema: z.object({ kind: z.enum(Object.keys(FORGED) as [string, ...string[]]) }),
    },
    ({ kind }, ctx) => {
      process.stdout.write(FORGED[kind](ctx.mcpReq.id) + "\n");
      return new Promise(() => {});
    },
  );
  server.registerTool("pid", { description: "Returns the server's pid" }, () => text(String(process.pid)));
  server.registerTool("spawn_child", { description: "Starts a long-lived child process" }, () => {
    const child = spawn("sleep", ["300"], { stdio: "ignore" });
    return text(String(child.pid));
  });
  for (let i = 0; i < Number(flags.get("tools") ?? 0); i++) {
    server.registerTool(`extra_${i}`, { description: `Extra tool ${i}` }, () => text(String(i)));
  }
  if (flags.has("page-size")) {
    const pages = paginate(server, Number(flags.get("page-size")));
    server.registerTool("pages_served", { description: "How many tools/list pages were served" }, () => {
      return text(String(pages.served));
    });
  }

  if (flags.has("garbage")) garbage();
  await server.connect(new StdioServerTransport());
}

/** Invalid replies to request `id`, by kind: each breaks JSON-RPC or MCP in a different way. */
const FORGED: Record<string, (id: unknown) => string> = {
  // A result that is not an object, an error that is not an object, a reply with both, a wrong
  // protocol version, an id no request has, a reply cut in half, and a valid reply wrapped in garbage.
  result_not_object: (id) => JSON.stringify({ jsonrpc: "2.0", id, result: "a string" }),
  error_not_object: (id) => JSON.stringify({ jsonrpc: "2.0", id, error: "broken" }),
  result_and_error: (id) =>
    JSON.stringify({ jsonrpc: "2.0", id, result: { content: [] }, error: { code: 1, message: "x" } }),
  wrong_version: (id) => JSON.stringify({ jsonrpc: "1.0", id, result: { content: [] } }),
  unknown_id: () => JSON.stringify({ jsonrpc: "2.0", id: 987654321, result: { content: [] } }),
  truncated: (id) => JSON.stringify({ jsonrpc: "2.0", id, result: { content: [] } }).slice(0, 20),
  content_not_list: (id) => JSON.stringify({ jsonrpc: "2.0", id, result: { content: "text" } }),
};

/** Replaces the SDK's tools/list handler with one that serves pages, to exercise client paging. */
function paginate(server: McpServer, size: number): { served: number } {
  const counter = { served: 0 };
  // deno-lint-ignore no-explicit-any
  const low = server.server as any;
  const original = low._requestHandlers.get("tools/list");
  low._requestHandlers.set("tools/list", async (request: { params?: { cursor?: string } }, ctx: unknown) => {
    const all = await original({ ...request, params: {} }, ctx);
    const start = Number(request.params?.cursor ?? 0);
    const next = start + size;
    counter.served++;
    return {
      tools: all.tools.slice(start, next),
      ...(next < all.tools.length ? { nextCursor: String(next) } : {}),
    };
  });
  return counter;
}

if (flags.has("echo-env")) {
  const name = flags.get("echo-env")!;
  process.stderr.write(`faulty_server: ${name}=${process.env[name]} argv=${process.argv.join(" ")}\n`);
}
if (flags.has("flood-at-start")) {
  await floodStderr(Number(flags.get("flood-at-start")), "z");
}
if (flags.has("exit-at-start")) {
  process.stderr.write("faulty_server: exiting at start as asked\n");
  process.exit(Number(flags.get("exit-at-start")));
}
if (flags.has("silent")) {
  process.stdin.resume();
  setInterval(() => {}, 1 << 30);
} else {
  await serve();
}
