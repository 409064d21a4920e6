/**
 * `codemode serve --http` end to end: SDK v2 and v1 clients over Streamable HTTP, one sandbox per MCP
 * session, DELETE and idle ending a session, the Host/Origin/token guard, clear 4xx answers, and SIGTERM
 * leaving no container. Real podman sandboxes, real server-everything from npm.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client";
import type { StreamableHTTPClientTransport as V1Type } from "@modelcontextprotocol/sdk/client/streamableHttp";
// @ts-ignore: the package's "./*" export maps these types to "streamableHttp.js.d.ts", which `deno check` cannot find
import { StreamableHTTPClientTransport as V1Untyped } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fakeHome, HOST_SECRET, ROOT, SERVER_SECRET } from "./_serve.ts";
import {
  connectHttp,
  containersLabelled,
  eventually,
  type HttpServe,
  startHttpServe,
} from "./_serve_http.ts";
import { LABELS } from "../../core/sandbox/session_manager.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";

const V1Transport = V1Untyped as unknown as typeof V1Type;
const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED serve --http suite: podman or image ${TEST_IMAGE} missing`);

const TOKEN = "http-token-0c5d9e41";
const home = fakeHome();
const env = { CODEMODE_RUNTIME: "podman", CODEMODE_TIMEOUT: "30" };
let open: HttpServe | undefined;
let guarded: HttpServe | undefined;
const server = async () => (open ??= await startHttpServe(home, env));
const tokenServer = async () => (guarded ??= await startHttpServe(home, {
  ...env,
  CODEMODE_HTTP_TOKEN: TOKEN,
  CODEMODE_IDLE_TIMEOUT: "3s",
}));

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });

/** One raw HTTP exchange, so tests can send what SDK clients never would (a foreign Host, say). */
function raw(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; path?: string } = {},
): Promise<{ status: number; text: string; message: string; headers: Record<string, unknown> }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({
      host: target.hostname,
      port: target.port,
      path: options.path ?? target.pathname,
      method: options.method ?? "POST",
      headers: {
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        ...options.headers,
      },
    }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d)).on("end", () => {
        let message = "";
        try {
          message = JSON.parse(text).error?.message ?? "";
        } catch { /* not a JSON-RPC error */ }
        resolve({ status: res.statusCode!, text, message, headers: res.headers });
      });
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
});

test("a v2 SDK client lists exactly run_python, keeps state in its session and calls MCP tools", async () => {
  const c = await connectHttp((await server()).url);
  try {
    assert.match(c.sessionId(), /^[a-z0-9-]+\.[A-Za-z0-9_-]{32}$/, "<node id>.<192 random bits>");
    assert.deepEqual((await c.client.listTools()).tools.map((t) => t.name), ["run_python"]);
    assert.equal((await c.run("counter = 40\nprint('set')")).text, "set\n");
    assert.equal((await c.run("counter += 2\ncounter")).value, "42");
    const r = await c.run(
      "(await mcp_everything.echo(message='hi'), await mcp_everything.get_sum(a=2, b=3))",
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(r.value, "('Echo: hi', 'The sum of 2 and 3 is 5.')");
  } finally {
    await c.end();
  }
});

test("a v1 SDK client connects over Streamable HTTP and runs code", async () => {
  const client = new ClientV1({ name: "codemode-v1-tests", version: "1" });
  const transport = new V1Transport(new URL((await server()).url));
  await client.connect(transport);
  try {
    const r = await client.callTool({
      name: "run_python",
      arguments: { code: "import sys\nsys.version_info[0]" },
    });
    assert.equal((r.content as { text: string }[])[0].text, "3");
  } finally {
    await transport.terminateSession();
    await client.close();
  }
});

test("two clients get separate sandboxes: one's globals are not seen by the other", async () => {
  const { url } = await server();
  const [a, b] = await Promise.all([connectHttp(url), connectHttp(url)]);
  try {
    assert.notEqual(a.sessionId(), b.sessionId());
    await Promise.all([a.run("mine = 'a'"), b.run("mine = 'b'")]);
    assert.equal((await a.run("mine")).value, "'a'");
    assert.equal((await b.run("mine")).value, "'b'");
    await a.run("only_a = 1");
    assert.equal((await b.run("'only_a' in globals()")).value, "False");
    const [ca, cb] = await Promise.all([a, b].map((c) => containersLabelled(LABELS.session, c.sessionId())));
    assert.equal(ca.length, 1);
    assert.equal(cb.length, 1);
    assert.notEqual(ca[0], cb[0]);
  } finally {
    await Promise.all([a.end(), b.end()]);
  }
});

test("DELETE ends the session: its sandbox is removed and its id is then refused with 404", async () => {
  const { url } = await server();
  const c = await connectHttp(url);
  await c.run("x = 1");
  const id = c.sessionId();
  assert.equal((await containersLabelled(LABELS.session, id)).length, 1);
  await c.end();
  assert.deepEqual(await containersLabelled(LABELS.session, id), []);
  const after = await raw(url, {
    headers: { "mcp-session-id": id },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });
  assert.equal(after.status, 404);
  assert.match(after.message, /not found: start a new session with initialize/);
});

test("a foreign Host or Origin is refused with 403, a loopback Origin is served", async () => {
  const { url } = await server();
  const port = new URL(url).port;
  const host = await raw(url, { headers: { host: `attacker.example:${port}` }, body: initialize });
  assert.equal(host.status, 403);
  assert.match(host.message, /Refused Host "attacker\.example:\d+"/);
  const origin = await raw(url, { headers: { origin: "http://attacker.example" }, body: initialize });
  assert.equal(origin.status, 403);
  assert.match(origin.message, /Refused Origin "http:\/\/attacker\.example"/);
  const local = await raw(url, { headers: { origin: `http://localhost:${port}` }, body: initialize });
  assert.equal(local.status, 200);
  const id = String(local.headers["mcp-session-id"]);
  assert.equal((await raw(url, { method: "DELETE", headers: { "mcp-session-id": id } })).status, 200);
});

test("bad requests get a clear 4xx", async () => {
  const { url } = await server();
  const cases: [string, Parameters<typeof raw>[1], number, RegExp][] = [
    ["wrong path", { path: "/other", body: initialize }, 404, /MCP is served at \/mcp/],
    ["PUT", { method: "PUT", body: initialize }, 405, /Method "PUT" not allowed/],
    ["not JSON", { body: "{nope" }, 400, /not JSON/],
    // Declared length only: the server answers before reading, so the client never writes to a closed socket.
    ["body over 4 MiB", { headers: { "content-length": String(5 * 1024 * 1024) }, body: "{}" }, 413, /limit/],
    [
      "no session, not initialize",
      { body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) },
      400,
      /Mcp-Session-Id/,
    ],
    ["unknown session", { headers: { "mcp-session-id": "nope" }, body: initialize }, 404, /"nope" not found/],
  ];
  for (const [what, options, status, message] of cases) {
    const r = await raw(url, options);
    assert.equal(r.status, status, `${what}: ${r.text}`);
    // The dashboard answers other paths than /mcp, in its own JSON shape.
    assert.match(r.message || r.text, message, what);
  }
});

test("with a token set, a missing or wrong one gets 401; sandbox code never sees it", async () => {
  const { url } = await tokenServer();
  const missing = await raw(url, { body: initialize });
  assert.equal(missing.status, 401);
  assert.match(String(missing.headers["www-authenticate"]), /^Bearer/);
  await assert.rejects(connectHttp(url, { authorization: "Bearer wrong" }));
  const c = await connectHttp(url, { authorization: `Bearer ${TOKEN}` });
  try {
    const r = await c.run(`
import os
seen = str(dict(os.environ)) + open("/proc/self/environ", "rb").read().decode(errors="replace")
seen += str(await mcp_everything.echo(message="x"))
[s for s in (${JSON.stringify([TOKEN, HOST_SECRET, SERVER_SECRET])}) if s in seen]`);
    assert.equal(r.isError, false, r.text);
    assert.equal(r.value, "[]");
  } finally {
    await c.end();
  }
});

test("a client that goes away without DELETE has its session ended after the idle timeout", async () => {
  const { url } = await tokenServer(); // CODEMODE_IDLE_TIMEOUT=3s
  const c = await connectHttp(url, { authorization: `Bearer ${TOKEN}` });
  await c.run("x = 1");
  const id = c.sessionId();
  assert.equal((await containersLabelled(LABELS.session, id)).length, 1);
  // Closing drops the client's event stream; an open stream would count as activity.
  await c.client.close();
  // Only the log tells the session ended without touching it: any request would count as activity.
  const ended = () =>
    guarded!.stderr().split("\n").some((line) =>
      line.includes('"msg":"HTTP session ended"') && line.includes(`"session":"${id}","why":"idle"`)
    );
  assert.ok(await eventually(() => Promise.resolve(ended()), 20_000));
  assert.deepEqual(await containersLabelled(LABELS.session, id), []);
  const after = await raw(url, {
    headers: { "mcp-session-id": id, authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });
  assert.equal(after.status, 404);
});

test("a non-loopback --host without a token, and --port without --http, are usage errors", async () => {
  const cli = (args: string[]) =>
    new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        join(ROOT, "node_modules/.bin/deno"),
        ["run", "-A", "--quiet", join(ROOT, "cli.ts"), ...args],
        { env: { PATH: process.env.PATH ?? "", HOME: home } },
        (error, _stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stderr }),
      )
    );
  const open = await cli(["serve", "--http", "--host", "0.0.0.0"]);
  assert.equal(open.code, 2);
  assert.match(open.stderr, /Refusing to listen on "0\.0\.0\.0" without a token/);
  const port = await cli(["serve", "--port", "9"]);
  assert.equal(port.code, 2);
  assert.match(port.stderr, /--port applies only with --http/);
});

test("SIGTERM with live sessions leaves no container and nothing on stdout", async () => {
  const served = await server();
  const clients = await Promise.all([connectHttp(served.url), connectHttp(served.url)]);
  await Promise.all(clients.map((c) => c.run("y = 2")));
  assert.equal((await containersLabelled(LABELS.owner, served.pid)).length, 2);
  assert.equal(await served.stop("SIGTERM"), 0);
  assert.deepEqual(await containersLabelled(LABELS.owner, served.pid), []);
  assert.equal(served.stdout(), "");
  await Promise.allSettled(clients.map((c) => c.client.close()));
  if (guarded) {
    assert.equal(await guarded.stop("SIGTERM"), 0);
    assert.deepEqual(await containersLabelled(LABELS.owner, guarded.pid), []);
  }
});
