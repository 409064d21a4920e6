/**
 * A real MCP registry for the tests: an HTTP server on loopback serving the registry API (v0.1, or the v0
 * paths only) from `tests/testdata/registry/`, plus a generated entry with a 5 MB description, and a
 * Streamable HTTP MCP server at `/mcp` (the remote entry's endpoint) that wants an `X-Api-Key` header.
 * It can be made slow or broken, and records every request.
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";
import { ROOT } from "./_serve.ts";

/** How the registry answers. */
export type RegistryMode = "ok" | "v0-only" | "error" | "slow" | "garbage";

/** A running test registry. */
export interface TestRegistry {
  /** Its base URL (what CODEMODE_REGISTRY_URL is set to). */
  url: string;
  /** The remote entry's MCP endpoint. */
  mcpUrl: string;
  /** The key the remote endpoint accepts. */
  apiKey: string;
  /** A path no test may ever find: hostile entries name it. */
  pwnedFile: string;
  /** Every request path (with query) so far. */
  requests: string[];
  /** Every X-Api-Key header the MCP endpoint got. */
  apiKeys: string[];
  mode: RegistryMode;
  close(): Promise<void>;
}

/** Entries of the registry, as the API sends them. */
function entries(mcpUrl: string, pwnedFile: string): Record<string, unknown>[] {
  const dir = join(ROOT, "tests/testdata/registry");
  const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
  const servers = files.map((f) =>
    JSON.parse(
      readFileSync(join(dir, f), "utf8").replaceAll("${MCP_URL}", mcpUrl).replaceAll(
        "${PWNED_FILE}",
        pwnedFile,
      ),
    )
  );
  servers.push({
    name: "io.example.hostile/huge-description",
    description: "memory ".repeat(750_000), // 5.25 MB
    version: "1.0.0",
    packages: [{
      registryType: "npm",
      identifier: "@modelcontextprotocol/server-memory",
      version: "2026.8.31",
      transport: { type: "stdio" },
    }],
  });
  return servers;
}

/** Starts the registry on an ephemeral loopback port. */
export function startRegistry(mode: RegistryMode = "ok"): Promise<TestRegistry> {
  const apiKey = `key-${crypto.randomUUID()}`;
  const pwnedFile = join(Deno.makeTempDirSync({ prefix: "codemode-pwned-" }), "pwned");
  const requests: string[] = [];
  const apiKeys: string[] = [];
  let servers: Record<string, unknown>[] = [];
  const mcp = createMcpHandler(() => {
    const server = new McpServer({ name: "remote-echo", version: "1.0.0" });
    server.registerTool(
      "echo",
      { description: "Echoes a message back", inputSchema: z.object({ message: z.string() }) },
      ({ message }) => ({ content: [{ type: "text" as const, text: `echo: ${message}` }] }),
    );
    return server;
  });
  const official = { "io.modelcontextprotocol.registry/official": { status: "active", isLatest: true } };
  const wrap = (server: Record<string, unknown>) => ({ server, _meta: official });

  return new Promise((resolve) => {
    const registry: TestRegistry = {
      url: "",
      mcpUrl: "",
      apiKey,
      pwnedFile,
      requests,
      apiKeys,
      mode,
      close: async () => {
        await http.shutdown();
      },
    };
    const http = Deno.serve({
      port: 0,
      hostname: "127.0.0.1",
      onListen: ({ port }) => {
        registry.url = `http://127.0.0.1:${port}`;
        registry.mcpUrl = `${registry.url}/mcp`;
        servers = entries(registry.mcpUrl, pwnedFile);
        resolve(registry);
      },
    }, async (request) => {
      const url = new URL(request.url);
      if (url.pathname === "/mcp") {
        const key = request.headers.get("x-api-key") ?? "";
        apiKeys.push(key);
        if (key !== apiKey) return new Response("wrong key", { status: 401 });
        return await mcp.fetch(request);
      }
      requests.push(url.pathname + url.search);
      if (registry.mode === "error") return new Response("down for maintenance", { status: 503 });
      if (registry.mode === "slow") await new Promise((r) => setTimeout(r, 15_000));
      if (registry.mode === "garbage") return new Response("<html>not json</html>");
      const api = registry.mode === "v0-only" ? "v0" : "v0.1";
      const list = new RegExp(`^/${api.replace(".", "\\.")}/servers$`).exec(url.pathname);
      if (list) {
        const search = (url.searchParams.get("search") ?? "").toLowerCase();
        const limit = Math.min(100, Number(url.searchParams.get("limit") ?? 30));
        const start = Number(url.searchParams.get("cursor") ?? 0);
        const found = servers.filter((s) => String(s.name).toLowerCase().includes(search));
        const page = found.slice(start, start + limit);
        const next = start + limit < found.length ? String(start + limit) : undefined;
        return Response.json({
          servers: page.map(wrap),
          metadata: { count: page.length, ...(next ? { nextCursor: next } : {}) },
        });
      }
      const one = new RegExp(`^/${api.replace(".", "\\.")}/servers/([^/]+)/versions/([^/]+)$`).exec(
        url.pathname,
      );
      if (one) {
        const [name, version] = [decodeURIComponent(one[1]), decodeURIComponent(one[2])];
        const server = servers.find((s) =>
          s.name === name && (version === "latest" || s.version === version)
        );
        return server
          ? Response.json(wrap(server))
          : Response.json({ error: "Server not found" }, { status: 404 });
      }
      return Response.json({ error: "Not found" }, { status: 404 });
    });
  });
}
