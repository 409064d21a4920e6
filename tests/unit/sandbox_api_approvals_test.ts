/**
 * The sandbox API's call_tool with approvals and dry runs (fake pool): which calls ask, what a refusal
 * raises, that a secret of a server's config never reaches the question, and that only the host's view
 * of a tool's annotations decides what a dry run makes.
 */
import assert from "node:assert/strict";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { type DocSearch, sandboxApi, type ToolCaller } from "../../core/host_api/api.ts";
import { Policy } from "../../core/config/policy.ts";
import { type RpcContext, RpcError } from "../../core/host_api/rpc.ts";
import type { ApprovalAnswer, ApprovalRequest } from "../../core/host_api/approvals.ts";
import type { PlannedCall } from "../../core/host_api/dry_run.ts";

const SECRET = "tok-9f8e7d6c5b4a3210zyx";
const TOOLS: Tool[] = [
  { name: "read_file", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } },
  { name: "write_file", inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  { name: "create_thing", inputSchema: { type: "object" }, annotations: { destructiveHint: false } },
  { name: "plain", inputSchema: { type: "object" } },
];

function setup(policy: Policy, answer?: (r: ApprovalRequest) => ApprovalAnswer) {
  const calls: string[] = [];
  const asked: ApprovalRequest[] = [];
  const planned: PlannedCall[] = [];
  const notes: string[] = [];
  const pool: ToolCaller = {
    names: () => ["fs"],
    spec: () =>
      ({
        name: "fs",
        transport: "stdio",
        command: "x",
        env: { API_TOKEN: SECRET },
        source: { plugin: "t", file: "/f", key: "fs" },
      }) as ServerSpec,
    listTools: () => Promise.resolve(TOOLS),
    callToolReply: (_server, tool) => {
      calls.push(tool);
      return Promise.resolve({ result: { content: [{ type: "text", text: "done" }] } as CallToolResult });
    },
  };
  const docs: DocSearch = { search: () => [], docs: () => [] };
  const handler = sandboxApi(pool, docs, (reply, raw) => raw ? reply.result : "done", policy);
  const context: RpcContext = {
    session: "s",
    signal: new AbortController().signal,
    ...(answer ? { approve: (r) => (asked.push(r), Promise.resolve(answer(r))) } : {}),
    plan: (call) => planned.push(call),
    note: (text) => notes.push(text),
  };
  const call = (tool: string, args: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    handler("call_tool", { server: "fs", tool, arguments: args, ...extra }, context);
  return { call, calls, asked, planned, notes };
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error instanceof RpcError && error.pythonType === "PermissionError", `got ${error}`);
  return error.message;
}

const yes = (): ApprovalAnswer => ({ approved: true, outcome: "approved" });
const no = (r: ApprovalRequest): ApprovalAnswer => ({
  approved: false,
  outcome: "declined",
  message: `Call to "${r.server}/${r.tool}" declined by the user`,
});

Deno.test("a call that needs approval waits for it; the question carries the rule and redacted arguments", async () => {
  const s = setup(new Policy({ confirm: ["fs/write_*"] }), yes);
  assert.equal(await s.call("write_file", { path: "/a", token: SECRET }), "done");
  assert.equal(await s.call("read_file", { path: "/a" }), "done");
  assert.deepEqual(s.calls, ["write_file", "read_file"]);
  assert.equal(s.asked.length, 1, "only the confirmed tool asks");
  assert.equal(s.asked[0].tool, "write_file");
  assert.equal(s.asked[0].reason, 'CODEMODE_CONFIRM_TOOLS has "fs/write_*"');
  assert.equal(s.asked[0].summary, 'path="/a", token="[redacted]"');
});

Deno.test("a refused call raises PermissionError naming the tool and is never made", async () => {
  const s = setup(new Policy({ confirmDestructive: true }), no);
  assert.equal(await refusal(s.call("plain")), 'Call to "fs/plain" declined by the user');
  assert.equal(await refusal(s.call("write_file")), 'Call to "fs/write_file" declined by the user');
  assert.equal(await s.call("create_thing"), "done", "destructiveHint: false asks nothing");
  assert.deepEqual(s.calls, ["create_thing"]);
});

Deno.test("with nobody to ask, a call that needs approval is refused; an allowed fallback adds its note", async () => {
  const none = setup(new Policy({ confirm: ["*"] }));
  assert.match(await refusal(none.call("read_file")), /needs the user's approval .*nobody can be asked here/);
  assert.deepEqual(none.calls, []);
  const allow = setup(new Policy({ confirm: ["*"] }), () => ({
    approved: true,
    outcome: "unavailable",
    message: "ran without approval",
  }));
  await allow.call("write_file");
  assert.deepEqual(allow.notes, ["ran without approval"]);
});

Deno.test("a dry call of a tool not annotated read-only is planned, not made, and answers None", async () => {
  const s = setup(new Policy({ confirmDestructive: true }), no);
  assert.equal(await s.call("write_file", { path: "/a" }, { dry_run: true }), null);
  assert.equal(await s.call("plain", {}, { dry_run: true }), null);
  assert.equal(await s.call("create_thing", { n: 1 }, { dry_run: true }), null);
  assert.equal(await s.call("read_file", { path: "/a" }, { dry_run: true }), "done", "read-only tools run");
  assert.deepEqual(s.calls, ["read_file"]);
  assert.deepEqual(s.asked, [], "nothing that is not made is asked about");
  assert.deepEqual(s.planned, [
    { server: "fs", tool: "write_file", arguments: { path: "/a" } },
    { server: "fs", tool: "plain", arguments: {} },
    { server: "fs", tool: "create_thing", arguments: { n: 1 } },
  ]);
  // Only `true` marks a dry call: anything else the sandbox sends is an ordinary call, asked about.
  await refusal(s.call("write_file", {}, { dry_run: "yes" }));
  assert.equal(s.asked.length, 1);
});

Deno.test("deny still beats approvals and dry runs", async () => {
  const s = setup(new Policy({ denyTools: ["write_file"], confirm: ["*"] }), yes);
  assert.match(await refusal(s.call("write_file", {}, { dry_run: true })), /denied by policy/);
  assert.match(await refusal(s.call("write_file")), /denied by policy/);
  assert.deepEqual([s.calls, s.asked, s.planned], [[], [], []]);
});
