/**
 * The MCP face of codemode: one tool, `run_python`, and a capabilities resource. Tool and argument
 * descriptions stay short because every token here is paid in every conversation; details live in
 * `runtime.capability_summary()` and the resource.
 * @module
 */
import { McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";
import type { OutputPlugin, RunResult } from "./contracts/output.ts";
import { log } from "./log.ts";
import type { RunOptions } from "./sandbox_session.ts";

/** Runs code for a client; the session manager in production, a fake in unit tests. */
export interface CodeRunner {
  run(key: string, code: string, options: RunOptions): Promise<RunResult>;
}

/** What the MCP server needs. */
export interface McpServerOptions {
  runner: CodeRunner;
  output: OutputPlugin;
  /** Seconds used when the caller gives no timeout, and the most a caller may ask for. */
  defaultTimeout: number;
  maxTimeout: number;
  /** The text of the capabilities resource. */
  capabilities: () => string;
  /** Starts the named upstream servers ahead of the run; returns the names that are not configured. */
  preload: (servers: string[]) => Promise<string[]>;
  /** Session key for this connection. */
  sessionKey: string;
  version: string;
}

/** URI of the capabilities resource. */
export const CAPABILITIES_URI = "codemode://capabilities";

const DESCRIPTION = "Run Python in a persistent sandbox (state kept between calls; top-level await). " +
  "Call any configured MCP tool: `await mcp_<server>.<tool>(**args)`. " +
  "Find tools: `from mcp import runtime; await runtime.search_tool_docs('query')`; " +
  "more: `runtime.capability_summary()`.";

/** Builds the codemode MCP server (not yet connected to a transport). */
export function createMcpServer(options: McpServerOptions): McpServer {
  const server = new McpServer(
    { name: "codemode", version: options.version },
    {
      instructions:
        "Use run_python to call MCP tools from Python; search tools with runtime.search_tool_docs.",
    },
  );
  server.registerTool(
    "run_python",
    {
      description: DESCRIPTION,
      inputSchema: z.object({
        code: z.string().describe("Python source; the last expression's value is returned"),
        timeout: z.number().positive().optional().describe(`Seconds (default ${options.defaultTimeout})`),
        servers: z.array(z.string()).optional().describe("MCP servers to start first"),
      }),
    },
    async ({ code, timeout, servers }) => {
      const result = await runPython(options, code, timeout, servers);
      const rendered = options.output.render(result);
      return {
        content: [{ type: "text", text: rendered.text }],
        structuredContent: rendered.structured,
        isError: result.status !== "ok",
      };
    },
  );
  server.registerResource(
    "capabilities",
    CAPABILITIES_URI,
    { title: "codemode capabilities", description: "What run_python can do", mimeType: "text/markdown" },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/markdown", text: options.capabilities() }] }),
  );
  return server;
}

async function runPython(
  options: McpServerOptions,
  code: string,
  timeout: number | undefined,
  servers: string[] | undefined,
): Promise<RunResult> {
  const started = performance.now();
  const notes: string[] = [];
  const seconds = Math.min(timeout ?? options.defaultTimeout, options.maxTimeout);
  if (timeout !== undefined && timeout > options.maxTimeout) {
    notes.push(`timeout lowered to the ${options.maxTimeout}s maximum`);
  }
  try {
    if (servers?.length) {
      const unknown = await options.preload(servers);
      if (unknown.length) {
        return failure(
          `Unknown server(s): ${unknown.map((s) => `"${s}"`).join(", ")}; see runtime.discovered_servers()`,
          started,
        );
      }
    }
    const result = await options.runner.run(options.sessionKey, code, { timeout: seconds });
    return notes.length ? { ...result, notes: [...notes, ...(result.notes ?? [])] } : result;
  } catch (error) {
    log.error("run_python failed", { error: String(error) });
    return failure(`${(error as Error).message ?? error}. Run \`codemode doctor\` for a diagnosis`, started);
  }
}

function failure(message: string, started: number): RunResult {
  return {
    status: "error",
    stdout: "",
    stderr: "",
    error: message,
    duration: (performance.now() - started) / 1000,
  };
}
