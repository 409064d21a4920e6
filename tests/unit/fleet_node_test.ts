/**
 * A fleet node without sandboxes: node ids and the session ids they mint, `/readyz`, and the drain, on a
 * real `McpHttpServer` whose sessions hold a bare MCP server (one `wait` tool), driven by the real SDK
 * client and by raw requests.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";
import { McpHttpServer } from "../../core/serve/http_server.ts";
import { mintSessionId, NodeIdError, nodeOfSession, resolveNodeId } from "../../core/serve/node_id.ts";
import { waitFor } from "../../core/serve/readiness.ts";
import { allowedHostsFor } from "../../core/serve/http_guard.ts";
import { resolveSettings } from "../../core/config/settings.ts";

Deno.test("resolveNodeId() takes CODEMODE_NODE_ID, else the host name lower-cased, and names the variable when neither fits", () => {
  assert.equal(resolveNodeId("node-1", "ignored"), "node-1");
  assert.equal(resolveNodeId(undefined, "Build-07"), "build-07");
  assert.equal(resolveNodeId("", "web"), "web");
  assert.throws(() => resolveNodeId("Node_1", "web"), (e: Error) => {
    assert.ok(e instanceof NodeIdError);
    return /Invalid CODEMODE_NODE_ID="Node_1"/.test(e.message);
  });
  assert.throws(() => resolveNodeId("-a", "web"), /CODEMODE_NODE_ID/);
  assert.throws(() => resolveNodeId("a".repeat(64), "web"), /CODEMODE_NODE_ID/);
  assert.throws(
    () => resolveNodeId(undefined, "web01.example.com"),
    /host name "web01\.example\.com" is not a valid node id.*set CODEMODE_NODE_ID/,
  );
});

Deno.test("a minted session id is <node>.<at least 128 random url-safe bits>, and names its node", () => {
  const ids = new Set(Array.from({ length: 1000 }, () => mintSessionId("node-1")));
  assert.equal(ids.size, 1000);
  for (const id of ids) {
    const match = /^node-1\.([A-Za-z0-9_-]+)$/.exec(id);
    assert.ok(match, id);
    assert.ok(match[1].length * 6 >= 128, "at least 128 random bits");
    assert.equal(nodeOfSession(id), "node-1");
  }
  assert.equal(nodeOfSession("0b9a3c2e-uuid-without-node"), undefined);
  assert.equal(nodeOfSession(".x"), undefined);
  assert.equal(nodeOfSession("Bad_Node.x"), undefined);
});

Deno.test("settings: CODEMODE_NODE_ID must be a DNS label; CODEMODE_ALLOWED_HOSTS a list of host names", () => {
  const good = resolveSettings({
    CODEMODE_NODE_ID: "n-2",
    CODEMODE_ALLOWED_HOSTS: "Codemode.Example.com, 10.0.0.5",
  });
  assert.deepEqual(good.problems, []);
  assert.equal(good.settings.nodeId, "n-2");
  assert.deepEqual(good.settings.allowedHosts, ["codemode.example.com", "10.0.0.5"]);
  assert.equal(good.settings.drainTimeout, 30);
  const bad = resolveSettings({ CODEMODE_NODE_ID: "n.2", CODEMODE_ALLOWED_HOSTS: "http://x:80" });
  assert.match(bad.problems[0].message, /^Invalid CODEMODE_NODE_ID="n\.2": expected lowercase letters/);
  assert.match(
    bad.problems[1].message,
    /^Invalid CODEMODE_ALLOWED_HOSTS="http:\/\/x:80": "http:\/\/x:80" is not a host/,
  );
});

Deno.test("allowedHostsFor() adds a balancer's names, and restricts a wildcard bind once names are given", () => {
  assert.deepEqual(allowedHostsFor("10.0.0.2", ["Fleet.Test"]), [
    "localhost",
    "127.0.0.1",
    "[::1]",
    "10.0.0.2",
    "fleet.test",
  ]);
  assert.equal(allowedHostsFor("0.0.0.0"), undefined, "a wildcard bind without names takes any Host");
  assert.deepEqual(allowedHostsFor("0.0.0.0", ["fleet.test"]), [
    "localhost",
    "127.0.0.1",
    "[::1]",
    "fleet.test",
  ]);
});

Deno.test("waitFor() resolves true once its check holds, false at its timeout", async () => {
  let busy = true;
  setTimeout(() => (busy = false), 150);
  assert.equal(await waitFor(() => !busy, 5_000, 10), true);
  assert.equal(await waitFor(() => false, 100, 10), false);
});

/** A node on a free loopback port whose sessions have one tool, `wait`, that sleeps `ms`. */
async function node(options: { room?: () => boolean; token?: string; busy?: (id: string) => boolean } = {}) {
  const closed: string[] = [];
  const server = await McpHttpServer.start({
    host: "127.0.0.1",
    port: 0,
    node: "node-a",
    idleTimeout: 300,
    token: options.token,
    room: options.room,
    busy: options.busy,
    open: () => {
      const mcp = new McpServer({ name: "fleet-unit", version: "1" });
      mcp.registerTool("wait", { inputSchema: z.object({ ms: z.number() }) }, async ({ ms }) => {
        await new Promise((r) => setTimeout(r, ms));
        return { content: [{ type: "text", text: `waited ${ms}` }] };
      });
      return mcp;
    },
    close: (id) => Promise.resolve(void closed.push(id)),
  });
  return { server, closed };
}

async function connect(url: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: "fleet-unit", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  return { client, transport };
}

function raw(
  url: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({
      host: target.hostname,
      port: target.port,
      path,
      method: options.method ?? "GET",
      headers: {
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        ...options.headers,
      },
    }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d)).on(
        "end",
        () => resolve({ status: res.statusCode!, body, headers: res.headers }),
      );
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
});

Deno.test("a node mints its sessions with its id and answers another node's or an unknown id with 404", async () => {
  const { server } = await node();
  try {
    const { client, transport } = await connect(server.url);
    assert.match(transport.sessionId ?? "", /^node-a\.[A-Za-z0-9_-]{32}$/);
    const foreign = await raw(server.url, "/mcp", {
      method: "POST",
      headers: { "mcp-session-id": "node-b.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(foreign.status, 404);
    assert.match(foreign.body, /names node \\"node-b\\".*start a new session with initialize/);
    const gone = await raw(server.url, "/mcp", {
      method: "POST",
      headers: { "mcp-session-id": "node-a.nosuchsession" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(gone.status, 404);
    assert.doesNotMatch(gone.body, /names node/, "an id of this node needs no word about other nodes");
    const hostile = await raw(server.url, "/mcp", {
      method: "POST",
      headers: { "mcp-session-id": `node-a."}\\${"x".repeat(4000)}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(hostile.status, 404);
    assert.ok(hostile.body.length < 600, "the id is clipped in the answer");
    assert.equal(JSON.parse(hostile.body).error.code, -32001, "quotes in the id cannot break the JSON");
    await client.close();
  } finally {
    await server.close();
  }
});

Deno.test("/readyz answers without the token: 200 with room, 503 full without, and refuses a foreign Host", async () => {
  let room = true;
  const { server } = await node({ room: () => room, token: "t0k3n" });
  try {
    const ready = await raw(server.url, "/readyz");
    assert.equal(ready.status, 200);
    assert.deepEqual(JSON.parse(ready.body), { status: "ready", node: "node-a", sessions: 0 });
    assert.equal(ready.headers["cache-control"], "no-store");
    room = false;
    const full = await raw(server.url, "/readyz");
    assert.equal(full.status, 503);
    assert.deepEqual(JSON.parse(full.body), {
      status: "not ready",
      node: "node-a",
      reason: "full",
      sessions: 0,
    });
    assert.equal((await raw(server.url, "/readyz", { headers: { host: "evil.test" } })).status, 403);
    assert.equal((await raw(server.url, "/readyz", { method: "POST" })).status, 405);
    assert.equal(
      (await raw(server.url, "/mcp", { method: "POST", body: INITIALIZE })).status,
      401,
      "MCP still needs it",
    );
  } finally {
    await server.close();
  }
});

Deno.test("a draining node refuses initialize with 503 and Retry-After, serves its live sessions, and ends each once its work is done", async () => {
  const { server, closed } = await node();
  try {
    const a = await connect(server.url);
    const b = await connect(server.url);
    const slow = a.client.callTool({ name: "wait", arguments: { ms: 600 } });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    server.drain();
    assert.equal(server.draining, true);
    const refused = await raw(server.url, "/mcp", { method: "POST", body: INITIALIZE });
    assert.equal(refused.status, 503);
    assert.equal(refused.headers["retry-after"], "1");
    assert.match(refused.body, /Node \\"node-a\\" is draining and takes no new session/);
    const readyz = await raw(server.url, "/readyz");
    assert.equal(readyz.status, 503);
    assert.equal(JSON.parse(readyz.body).reason, "draining");
    // The other session keeps its client busy: served while the run in flight finishes, never cut.
    let answered = 0;
    const busy = (async () => {
      for (;;) {
        const r = await b.client.callTool({ name: "wait", arguments: { ms: 40 } }).catch((e) => e);
        if (r instanceof Error) return r;
        assert.deepEqual(r.content, [{ type: "text", text: "waited 40" }]);
        answered++;
      }
    })();
    assert.equal(await server.drained(10_000), "drained");
    assert.ok(Date.now() - t0 >= 450, "no session ended before the request in flight was answered");
    assert.ok(Date.now() - t0 < 5_000, "a busy session ends between its requests, not at the timeout");
    assert.deepEqual((await slow).content, [{ type: "text", text: "waited 600" }]);
    assert.equal((await busy as { status?: number }).status, 404, "then its next request gets 404");
    assert.ok(answered >= 3, `the busy session was served during the drain (${answered} answers)`);
    assert.deepEqual(closed.sort(), [a.transport.sessionId, b.transport.sessionId].sort());
    await Promise.all([a.client.close(), b.client.close()]);
  } finally {
    await server.close();
  }
});

Deno.test("a drain keeps a session whose work goes on without a request (a job, an MCP task) until it ends", async () => {
  let working = true;
  const { server, closed } = await node({ busy: () => working });
  try {
    const { client, transport } = await connect(server.url);
    server.drain();
    assert.equal(await server.drained(300), "timeout", "not ended while its background work runs");
    assert.deepEqual(closed, []);
    setTimeout(() => (working = false), 200);
    assert.equal(await server.drained(10_000), "drained", "ended once its work is done");
    assert.deepEqual(closed, [transport.sessionId]);
    await client.close();
  } finally {
    await server.close();
  }
});

Deno.test("a drain whose request in flight outlasts the timeout says so; close() ends the rest", async () => {
  const { server, closed } = await node();
  try {
    const { client, transport } = await connect(server.url);
    // Its stream is cut by close(): the SDK client then waits for its own request timeout, short here.
    const long = client.callTool({ name: "wait", arguments: { ms: 1500 } }, { timeout: 2_000 }).catch((e) =>
      e
    );
    await new Promise((r) => setTimeout(r, 100));
    server.drain();
    assert.equal(await server.drained(300), "timeout");
    assert.deepEqual(closed, []);
    await server.close();
    assert.deepEqual(closed, [transport.sessionId]);
    await long;
    await client.close();
  } finally {
    await server.close();
  }
});
