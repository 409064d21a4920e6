/**
 * Test helper for the pre-run check: the tools of the servers the check corpus calls (the reference
 * servers' catalogs and tests/testdata/precheck/servers.json), and a host that serves the sandbox's calls
 * with the real RPC handler (core/host_api/api.ts) over a fake pool that records every tool call it gets.
 * @module
 */
import { readFileSync } from "node:fs";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { sandboxApi, type ToolCaller } from "../../core/host_api/api.ts";
import { Policy } from "../../core/config/policy.ts";
import { type RpcContext, RpcError } from "../../core/host_api/rpc.ts";
import { RunPlans } from "../../core/host_api/plans.ts";
import type { Approver } from "../../core/host_api/approvals.ts";
import { toolDoc } from "../../core/catalog/docs.ts";
import { pythonAlias } from "../../core/python_alias.ts";
import type { BootstrapConfig } from "../../core/sandbox/protocol.ts";
import type { RpcAnswer, RpcFrame } from "./_local_python.ts";

const data = (path: string) =>
  JSON.parse(readFileSync(new URL(`../testdata/${path}`, import.meta.url), "utf8"));

/** Every server of the corpus and its tools. */
export const CORPUS_TOOLS: Record<string, Tool[]> = {
  ...Object.fromEntries(
    ["everything", "filesystem", "memory"].map((
      name,
    ) => [name, data(`catalogs/${name}.json`).tools as Tool[]]),
  ),
  ...Object.fromEntries(
    Object.entries(data("precheck/servers.json")).filter(([k]) => !k.startsWith("_")) as [string, Tool[]][],
  ),
};

/** The bootstrap config naming the servers of `tools`. */
export function configFor(tools: Record<string, Tool[]> = CORPUS_TOOLS, extra = {}): BootstrapConfig {
  return {
    max_output: 1024 * 1024,
    servers: Object.keys(tools).map((name) => ({ name, alias: pythonAlias(name) })),
    ...extra,
  };
}

/**
 * A host answering with the real API; `calls` lists the tool calls that reached the pool (with their
 * arguments in `made`). `approve` answers approval questions; plans live as long as the host.
 */
export function checkHost(
  tools: Record<string, Tool[]> = CORPUS_TOOLS,
  policy = new Policy(),
  options: { approve?: Approver; unplanned?: "deny" | "ask" } = {},
) {
  const calls: string[] = [];
  const made: { server: string; tool: string; args: Record<string, unknown> }[] = [];
  const pool: ToolCaller = {
    names: () => Object.keys(tools),
    spec: (name) => ({ name, transport: "stdio", command: "node" }) as ServerSpec,
    listTools: (name) => Promise.resolve(tools[name] ?? []),
    callTool: (name, tool, args) => {
      calls.push(`${name}/${tool}`);
      made.push({ server: name, tool, args });
      return Promise.resolve({ content: [{ type: "text", text: "ok" }] } as CallToolResult);
    },
  };
  const api = sandboxApi(
    pool,
    {
      search: () => [],
      docs: (server) => (tools[server] ?? []).map((t) => toolDoc(server, t)),
    },
    { unwrap: (r) => r.structuredContent ?? "ok", raw: (r) => r },
    policy,
    undefined,
    { unplanned: options.unplanned },
  );
  const signal = new AbortController().signal;
  const context: RpcContext = {
    session: "test",
    signal,
    plans: new RunPlans(),
    ...(options.approve ? { approve: (request) => options.approve!(request, signal) } : {}),
  };
  const answer = async (rpc: RpcFrame): Promise<RpcAnswer> => {
    try {
      return { value: (await api(rpc.method, rpc.params, context)) ?? null };
    } catch (error) {
      const type = error instanceof RpcError ? error.pythonType : "RuntimeError";
      return { error: { type, message: (error as Error).message } };
    }
  };
  return { calls, made, answer };
}
