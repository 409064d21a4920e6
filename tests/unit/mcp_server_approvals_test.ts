/**
 * The MCP server's part in approvals, over in-memory transports with SDK clients and a fake runner that
 * plays the sandbox: each run gets an approver whose questions reach that run's client as an
 * elicitation form, or, for a client without the capability, the fallback.
 */
import assert from "node:assert/strict";
import { Client, type ElicitRequest } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { type CodeRunner, createMcpServer } from "../../core/serve/mcp_server.ts";
import { compact } from "../../plugins/output/compact.ts";
import { ApprovalBroker } from "../../core/host_api/approvals.ts";

/** A runner whose "sandbox" asks to approve one write and prints what it was told. */
const asksOnce: CodeRunner = {
  async run(_key, _code, options) {
    assert.ok(options.approve, "every run gets an approver");
    const answer = await options.approve({
      server: "fs",
      tool: "write_file",
      summary: 'path="/a"',
      reason: "test",
    }, new AbortController().signal);
    return { status: "ok", stdout: `${answer.outcome}|${answer.message ?? ""}`, stderr: "", duration: 0.01 };
  },
};

async function connect(broker: ApprovalBroker, sessionKey: string, client: Client) {
  const server = createMcpServer({
    runner: asksOnce,
    output: compact(),
    defaultTimeout: 30,
    maxTimeout: 120,
    capabilities: () => "",
    preload: () => Promise.resolve([]),
    sessionKey,
    version: "0",
    approvals: broker,
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  await client.connect(b);
  const run = async () => {
    const r = await client.callTool({ name: "run_python", arguments: { code: "x" } });
    return (r.content as { text: string }[])[0].text;
  };
  return { run, close: () => Promise.all([client.close(), server.close()]) };
}

Deno.test("a run's question reaches its own client as a form, and the answer reaches the run", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  const seen: ElicitRequest["params"][] = [];
  const asking = new Client({ name: "a", version: "1" }, { capabilities: { elicitation: {} } });
  asking.setRequestHandler("elicitation/create", (request) => {
    seen.push(request.params);
    return { action: "accept", content: { approve: true, scope: "once" } };
  });
  const other = new Client({ name: "b", version: "1" }, { capabilities: { elicitation: { form: {} } } });
  let otherAsked = 0;
  other.setRequestHandler("elicitation/create", () => (otherAsked++, { action: "decline" }));
  const a = await connect(broker, "session-a", asking);
  const b = await connect(broker, "session-b", other);
  try {
    assert.equal(await a.run(), "approved|");
    assert.equal(seen.length, 1);
    assert.equal(otherAsked, 0, "the other session's client is never asked");
    assert.equal((seen[0] as { mode?: string }).mode, "form");
    assert.match(seen[0].message, /"write_file" of the MCP server "fs"/);
    assert.equal(await b.run(), 'declined|Call to "fs/write_file" declined by the user');
    assert.deepEqual([seen.length, otherAsked], [1, 1]);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

Deno.test("a client without the elicitation capability is not asked: the fallback decides", async () => {
  const plain = new Client({ name: "plain", version: "1" });
  const deny = await connect(new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" }), "s", plain);
  try {
    assert.match(
      await deny.run(),
      /^unavailable\|Call to "fs\/write_file" needs the user's approval \(test\), and this client cannot ask/,
    );
  } finally {
    await deny.close();
  }
  const urlOnly = new Client({ name: "url", version: "1" }, { capabilities: { elicitation: { url: {} } } });
  urlOnly.setRequestHandler("elicitation/create", () => ({ action: "accept", content: { approve: true } }));
  const allow = await connect(new ApprovalBroker({ timeoutSeconds: 5, fallback: "allow" }), "s", urlOnly);
  try {
    assert.match(
      await allow.run(),
      /^unavailable\|"fs\/write_file" ran without approval/,
      "URL mode alone cannot show a form",
    );
  } finally {
    await allow.close();
  }
});
