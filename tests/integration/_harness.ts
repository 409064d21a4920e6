/**
 * Shared set-up for integration tests: a session manager over a real runtime plugin and the real
 * sandbox Python, and a check that no sandbox of this process is left behind.
 * @module
 */
import assert from "node:assert/strict";
import type { RuntimePlugin, SandboxStartOptions } from "../../core/contracts/runtime.ts";
import { LABELS, SessionManager, type SessionManagerOptions } from "../../core/sandbox/session_manager.ts";
import type { RpcHandler } from "../../core/host_api/rpc.ts";
import { bootstrapCommand, bootstrapFrame } from "../../sandbox/source.ts";

/** The image integration tests use. */
export const TEST_IMAGE = process.env.CODEMODE_TEST_IMAGE ?? "codemode-sandbox:latest";

/** An RPC handler for tests that don't reach MCP servers: echoes call_tool arguments back. */
export const echoRpc: RpcHandler = (method, params) => {
  if (method === "call_tool") return Promise.resolve({ echoed: params.arguments });
  if (method === "list_tools") return Promise.resolve([]);
  return Promise.reject(new Error(`no ${method} in tests`));
};

/** A session manager over `runtime` with the real sandbox source and test-friendly limits. */
export function sessions(
  runtime: RuntimePlugin,
  overrides: Partial<SessionManagerOptions> = {},
): SessionManager {
  return new SessionManager({
    runtime: () => Promise.resolve(runtime),
    image: TEST_IMAGE,
    limits: { memory: "256m", pids: 64 },
    command: bootstrapCommand(),
    bootstrap: () =>
      bootstrapFrame({ max_output: 1024 * 1024, servers: [{ name: "echo-server", alias: "echo_server" }] }),
    rpc: echoRpc,
    maxOutput: 1024 * 1024,
    idleTimeout: 300,
    graceSeconds: 2,
    ...overrides,
  });
}

/** Names of this process's sandboxes that still exist. */
export async function ownSandboxes(runtime: RuntimePlugin): Promise<string[]> {
  return (await runtime.listManaged())
    .filter((s) => s.labels[LABELS.owner] === String(process.pid))
    .map((s) => s.name);
}

/** Fails when a sandbox of this process is still there (after giving removal a moment). */
export async function assertNoLeftovers(runtime: RuntimePlugin): Promise<void> {
  let left: string[] = [];
  for (let i = 0; i < 20; i++) {
    left = await ownSandboxes(runtime);
    if (left.length === 0) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.deepEqual(left, [], "sandboxes left behind");
}

/** The text of an MCP tool result, its text items joined. */
export function textOf(result: { content?: unknown[] }): string {
  return (result.content as { text: string }[]).map((item) => item.text).join("");
}

/** True while the process exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

/** Start options for a Pyodide sandbox named `name` (the runtime ignores the image). */
export function pyodideStart(name: string): SandboxStartOptions {
  return { name, image: "", command: bootstrapCommand(), limits: { memory: "256m", pids: 64 }, labels: {} };
}
