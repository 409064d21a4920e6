/**
 * Starts a real `codemode serve` (from source) under the SDK client, in a throwaway HOME whose
 * MCP config holds server-everything and server-memory from node_modules.
 * @module
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { LABELS } from "../../core/sandbox/session_manager.ts";

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

/**
 * A `Deno.test` over one shared serve (or world around one) that `session()` starts on first use; ignored
 * when not `usable`.
 */
export function serveTest<T = Served>(
  usable: boolean,
  session: () => Promise<T>,
): (name: string, fn: (s: T) => Promise<void>) => void {
  return (name, fn) =>
    Deno.test({
      name,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => fn(await session()),
    });
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

/** How to launch `codemode serve` (from source) over stdio in `home`, with `env` on top of a test environment. */
export function serveCommand(
  home: string,
  env: Record<string, string> = {},
): { command: string; args: string[]; cwd: string; env: Record<string, string> } {
  return {
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
  };
}

/**
 * Starts `codemode serve` with `env` on top of a test environment; `client` (not yet connected) is the
 * one to use, e.g. with capabilities and request handlers of its own.
 */
export async function serve(
  env: Record<string, string> = {},
  home = fakeHome(),
  client = new Client({ name: "codemode-tests", version: "1" }),
): Promise<Served> {
  const transport = new StdioClientTransport({ ...serveCommand(home, env), stderr: "pipe" });
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

/** One run_python answer, with how long it took to arrive. */
export interface Answer {
  text: string;
  isError: boolean;
  structured: Record<string, unknown>;
  ms: number;
  /** Every content item of the result (text, images, links). */
  content: { type: string; text?: string; data?: string; mimeType?: string }[];
}

/**
 * Calls run_python and fails unless a result (not a transport or protocol error) arrives within
 * `boundMs`: the SDK's own request timeout is raised to the bound so it cannot fire first.
 */
export async function runWithin(s: Served, code: string, timeout: number, boundMs: number): Promise<Answer> {
  const started = Date.now();
  const r = await s.client.callTool(
    { name: "run_python", arguments: { code, timeout } },
    { timeout: boundMs, maxTotalTimeout: boundMs },
  );
  return {
    text: (r.content as { text: string }[])[0]?.text ?? "",
    isError: Boolean(r.isError),
    structured: (r.structuredContent ?? {}) as Record<string, unknown>,
    ms: Date.now() - started,
    content: r.content as Answer["content"],
  };
}

/** Fails unless the server still runs code: `print(1)` answers, or says the session was lost and the
 * call after it answers. */
export async function assertStillServing(s: Served, boundMs = 90_000): Promise<void> {
  let r = await runWithin(s, "print(1)", 20, boundMs);
  if (r.structured.session_lost === true) r = await runWithin(s, "print(1)", 20, boundMs);
  assert.equal(r.structured.stdout, "1\n", `the server must answer the next call: ${r.text.slice(0, 500)}`);
}

/** Names of the sandboxes labelled as owned by process `pid` (a serve) that still exist. */
export async function sandboxesOf(runtime: RuntimePlugin, pid: number | null | undefined): Promise<string[]> {
  assert.ok(pid, "the serve process has no pid");
  return (await runtime.listManaged())
    .filter((m) => m.labels[LABELS.owner] === String(pid))
    .map((m) => m.name);
}

/** Fails when a sandbox of process `pid` is still there once `graceMs` have passed. */
export async function assertNoSandboxOf(
  runtime: RuntimePlugin,
  pid: number | null | undefined,
  graceMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + graceMs;
  let left = await sandboxesOf(runtime, pid);
  while (left.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    left = await sandboxesOf(runtime, pid);
  }
  assert.deepEqual(left, [], `containers of serve ${pid} left behind`);
}
