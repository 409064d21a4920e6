import assert from "node:assert/strict";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { type DocSearch, sandboxApi, type ToolCaller } from "../../core/host_api/api.ts";
import { Policy } from "../../core/config/policy.ts";
import { RpcError, type RpcHandler } from "../../core/host_api/rpc.ts";
import { toolDoc } from "../../core/catalog/docs.ts";
import type { SearchHit } from "../../core/catalog/index.ts";

const TOOLS: Record<string, Tool[]> = {
  everything: [
    tool("echo", true),
    tool("get-sum", true),
    tool("toggle-logging", false),
    { name: "unannotated", inputSchema: { type: "object" } },
  ],
  "my-notes": [tool("read_notes", true), tool("write_note", false)],
};

function tool(name: string, readOnly: boolean): Tool {
  return {
    name,
    description: `${name} tool`,
    inputSchema: { type: "object" },
    annotations: { readOnlyHint: readOnly },
  };
}

/** A pool over TOOLS that records the calls that reached it. */
function fakePool(): ToolCaller & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    names: () => Object.keys(TOOLS),
    spec: (name) =>
      ({
        name,
        transport: "stdio",
        command: "node",
        source: { plugin: "t", file: "/f", key: name },
      }) as ServerSpec,
    listTools: (name) => Promise.resolve(TOOLS[name] ?? []),
    callToolReply: (name, t) => {
      calls.push(`${name}/${t}`);
      return Promise.resolve({ result: { content: [{ type: "text", text: "ok" }] } as CallToolResult });
    },
  };
}

/** Search that returns every tool of every server, best first in declaration order. */
const search: DocSearch = {
  search: (_query, { limit = 5, server }) =>
    Object.entries(TOOLS).filter(([s]) => !server || s === server).flatMap(([s, tools]) =>
      tools.map((t): SearchHit => ({ server: s, tool: t.name, description: t.description ?? "", score: 1 }))
    ).slice(0, limit),
  docs: (server) => (TOOLS[server] ?? []).map((t) => toolDoc(server, t)),
};

function api(
  policy: Policy,
): {
  call: (method: string, params: Record<string, unknown>, signal?: AbortSignal) => Promise<unknown>;
  pool: ReturnType<typeof fakePool>;
} {
  const pool = fakePool();
  const handler: RpcHandler = sandboxApi(pool, search, (reply, raw) => raw ? reply.result : "ok", policy);
  const run = new AbortController().signal;
  return { pool, call: (method, params, signal = run) => handler(method, params, { session: "s", signal }) };
}

async function permissionError(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error instanceof RpcError, `expected a refusal, got ${error}`);
  assert.equal(error.pythonType, "PermissionError");
  return error.message;
}

Deno.test("a denied server is missing from list_servers and search, and naming it raises PermissionError", async () => {
  const { call, pool } = api(new Policy({ denyServers: ["my-*"] }, { denyServers: "CODEMODE_DENY_SERVERS" }));
  const servers = await call("list_servers", {}) as { name: string }[];
  assert.deepEqual(servers.map((s) => s.name), ["everything"]);
  const hits = await call("search_tool_docs", { query: "notes", limit: 50 }) as SearchHit[];
  assert.ok(hits.length > 0 && hits.every((h) => h.server === "everything"));
  const reason = 'Server "my-notes" is denied by policy (CODEMODE_DENY_SERVERS has "my-*")';
  assert.equal(await permissionError(call("describe_server", { name: "my-notes" })), reason);
  assert.equal(await permissionError(call("list_tools", { server: "my_notes" })), reason);
  assert.equal(await permissionError(call("call_tool", { server: "my-notes", tool: "read_notes" })), reason);
  assert.deepEqual(pool.calls, [], "no refused call reached a server");
});

Deno.test("an unknown server that no rule refuses is still a KeyError listing only allowed servers", async () => {
  const { call } = api(new Policy({ denyServers: ["my-*"] }));
  const error = await call("list_tools", { server: "nope" }).catch((e: RpcError) => e) as RpcError;
  assert.equal(error.pythonType, "KeyError");
  assert.equal(error.message, 'Unknown server "nope"; configured: everything');
});

Deno.test("denied tools are missing from listings and search, and calling one raises PermissionError", async () => {
  const { call, pool } = api(
    new Policy({ denyTools: ["everything/toggle-*"] }, { denyTools: "/p/codemode.yaml" }),
  );
  const listed = await call("list_tools", { server: "everything" }) as { tool: string }[];
  assert.deepEqual(listed.map((t) => t.tool), ["echo", "get-sum", "unannotated"]);
  const described = await call("describe_server", { name: "everything" }) as { tools: { tool: string }[] };
  assert.ok(!described.tools.some((t) => t.tool === "toggle-logging"));
  const hits = await call("search_tool_docs", { query: "tool", limit: 3 }) as SearchHit[];
  assert.deepEqual(
    hits.map((h) => h.tool),
    ["echo", "get-sum", "unannotated"],
    "the limit counts allowed hits",
  );
  const reason =
    'Tool "everything/toggle-logging" is denied by policy (denyTools in /p/codemode.yaml has "everything/toggle-*")';
  assert.equal(
    await permissionError(call("call_tool", { server: "everything", tool: "toggle_logging" })),
    reason,
  );
  assert.equal(
    await permissionError(call("query_tool_docs", { server: "everything", tool: "toggle-logging" })),
    reason,
  );
  const missing = await call("call_tool", { server: "everything", tool: "nope" }).catch((e: RpcError) =>
    e
  ) as RpcError;
  assert.equal(missing.pythonType, "AttributeError");
  assert.equal(
    missing.message,
    'Server "everything" has no tool "nope"; available: echo, get_sum, unannotated',
  );
  assert.equal(await call("call_tool", { server: "everything", tool: "get_sum" }), "ok");
  assert.deepEqual(pool.calls, ["everything/get-sum"]);
});

Deno.test("read-only mode hides and refuses tools without readOnlyHint", async () => {
  const { call, pool } = api(new Policy({ readOnly: true }, { readOnly: "CODEMODE_READ_ONLY" }));
  const listed = await call("list_tools", { server: "my-notes" }) as { tool: string }[];
  assert.deepEqual(listed.map((t) => t.tool), ["read_notes"]);
  const hits = await call("search_tool_docs", { query: "x", limit: 100 }) as SearchHit[];
  assert.deepEqual(hits.map((h) => h.tool), ["echo", "get-sum", "read_notes"]);
  assert.match(
    await permissionError(call("call_tool", { server: "my-notes", tool: "write_note" })),
    /^Tool "my-notes\/write_note" is refused by policy: read-only mode \(CODEMODE_READ_ONLY\)/,
  );
  assert.match(
    await permissionError(call("call_tool", { server: "everything", tool: "unannotated" })),
    /read-only/,
  );
  assert.equal(await call("call_tool", { server: "my-notes", tool: "read_notes" }), "ok");
  assert.deepEqual(pool.calls, ["my-notes/read_notes"]);
});

Deno.test("the tool-call limit counts per run: a new run (signal) starts from zero", async () => {
  const { call, pool } = api(new Policy({ maxToolCalls: 2 }, { maxToolCalls: "CODEMODE_MAX_TOOL_CALLS" }));
  const first = new AbortController().signal;
  const params = { server: "everything", tool: "echo" };
  assert.equal(await call("call_tool", params, first), "ok");
  assert.equal(await call("call_tool", params, first), "ok");
  assert.match(
    await permissionError(call("call_tool", params, first)),
    /already made its 2 allowed tool calls/,
  );
  assert.equal(
    await call("list_tools", { server: "everything" }, first) !== undefined,
    true,
    "docs are not calls",
  );
  const second = new AbortController().signal;
  assert.equal(await call("call_tool", params, second), "ok");
  assert.equal(pool.calls.length, 3);
});

Deno.test("concurrent calls of one run cannot slip past the limit together", async () => {
  const { call, pool } = api(new Policy({ maxToolCalls: 3 }));
  const signal = new AbortController().signal;
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, () => call("call_tool", { server: "everything", tool: "echo" }, signal)),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 3);
  assert.equal(results.filter((r) => r.status === "rejected").length, 7, "every call was answered");
  assert.equal(pool.calls.length, 3);
});

Deno.test("list_servers answers from a redacted copy per spec: stable, unshared, and new when the spec is", async () => {
  const specs: Record<string, ServerSpec> = {
    notes: {
      name: "notes",
      transport: "stdio",
      command: "node",
      env: { NOTES_TOKEN: "tok-8c1f2e9a77" },
      description: "notes behind tok-8c1f2e9a77",
      source: { plugin: "t", file: "/f", key: "notes" },
    } as ServerSpec,
  };
  const pool: ToolCaller = { ...fakePool(), names: () => ["notes"], spec: (name) => specs[name] };
  const handler = sandboxApi(pool, search, () => "ok", new Policy());
  const list = async () =>
    await handler("list_servers", {}, { session: "s", signal: new AbortController().signal }) as Record<
      string,
      unknown
    >[];
  const [first] = await list();
  assert.equal(first.description, "notes behind [redacted]");
  first.description = "changed by the sandbox's side";
  assert.equal((await list())[0].description, "notes behind [redacted]");
  // A config reload brings a new spec object: its answer is made afresh.
  specs.notes = { ...specs.notes, description: "reloaded notes" };
  assert.equal((await list())[0].description, "reloaded notes");
});
