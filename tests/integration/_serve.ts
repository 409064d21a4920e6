/**
 * Starts a real `codemode serve` (from source) under the SDK client, in a throwaway HOME whose
 * MCP config holds server-everything and server-memory from node_modules.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

/** Repository root. */
export const ROOT = resolve(new URL("../..", import.meta.url).pathname);
/** A secret the MCP server config carries: sandbox code must never see it. */
export const SERVER_SECRET = "server-secret-7f3a9c";
/** A secret in codemode's own environment: sandbox code must never see it. */
export const HOST_SECRET = "host-secret-52be1d";

/** A served codemode and the client talking to it. */
export interface Served {
  client: Client;
  transport: StdioClientTransport;
  home: string;
  run(
    code: string,
    timeout?: number,
  ): Promise<{ text: string; isError: boolean; structured: Record<string, unknown> }>;
  close(): Promise<void>;
}

/** Writes an MCPs-dir config with the npm reference servers into a fresh HOME. */
export function fakeHome(extra: Record<string, unknown> = {}): string {
  const home = mkdtempSync(join(tmpdir(), "codemode-home-"));
  mkdirSync(join(home, "MCPs"));
  const servers = {
    everything: {
      command: "node",
      args: [join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"],
      env: { EVERYTHING_TOKEN: SERVER_SECRET },
    },
    memory: {
      command: "node",
      args: [join(ROOT, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")],
      env: { MEMORY_FILE_PATH: join(home, "memory.jsonl") },
    },
    ...extra,
  };
  writeFileSync(join(home, "MCPs", "servers.json"), JSON.stringify({ mcpServers: servers }));
  return home;
}

/** Starts `codemode serve` with `env` on top of a test environment. */
export async function serve(env: Record<string, string> = {}, home = fakeHome()): Promise<Served> {
  const transport = new StdioClientTransport({
    command: join(ROOT, "node_modules/.bin/deno"),
    args: ["run", "-A", "--quiet", join(ROOT, "cli.ts"), "serve"],
    cwd: home,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: home,
      CODEMODE_STATE_DIR: join(home, "state"),
      CODEMODE_LOG_LEVEL: "error",
      CODEMODE_TEST_HOST_SECRET: HOST_SECRET,
      ...env,
    },
    stderr: "pipe",
  });
  const client = new Client({ name: "codemode-tests", version: "1" });
  await client.connect(transport);
  return {
    client,
    transport,
    home,
    async run(code, timeout) {
      const r = await client.callTool({
        name: "run_python",
        arguments: { code, ...(timeout ? { timeout } : {}) },
      });
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      return {
        text,
        isError: Boolean(r.isError),
        structured: (r.structuredContent ?? {}) as Record<string, unknown>,
      };
    },
    close: () => client.close(),
  };
}
