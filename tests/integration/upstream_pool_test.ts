/**
 * The upstream pool against real MCP servers from npm: server-everything (stdio, Streamable HTTP, SSE),
 * server-filesystem and server-memory.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { Buffer } from "node:buffer";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { alive, textOf } from "./_harness.ts";
import { ToolError, toolResultForPython } from "../../core/host_api/tool_result.ts";
import { UpstreamExitedError, UpstreamPool } from "../../core/upstream/pool.ts";
import type { CallToolResult } from "@modelcontextprotocol/client";

/** A result's structured content, else its text decoded as JSON. */
function decoded(result: CallToolResult): unknown {
  return result.structuredContent ?? JSON.parse(textOf(result));
}

const source = { plugin: "test", file: "test", key: "test" };
const modules = new URL("../../node_modules/@modelcontextprotocol/", import.meta.url).pathname;
const EVERYTHING = `${modules}server-everything/dist/index.js`;

function everything(name = "everything", extra: Partial<ServerSpec> = {}): ServerSpec {
  return { name, transport: "stdio", command: "node", args: [EVERYTHING], source, ...extra };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs server-everything in an HTTP mode on a free port; resolves once it accepts connections. */
async function httpEverything(mode: "streamableHttp" | "sse", port?: number) {
  port ??= await freePort();
  const child = spawn("node", [EVERYTHING, mode], {
    env: { PATH: process.env.PATH ?? "", PORT: String(port) },
    stdio: ["ignore", "ignore", "ignore"],
  });
  const deadline = Date.now() + 15_000;
  while (true) {
    try {
      await (await fetch(`http://127.0.0.1:${port}/`)).body?.cancel();
      break;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    port,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
}

Deno.test("listTools() starts server-everything lazily and lists its tools", async () => {
  const pool = new UpstreamPool([everything()]);
  try {
    assert.equal(pool.status("everything").state, "idle");
    const names = (await pool.listTools("everything")).map((tool) => tool.name);
    for (const name of ["echo", "get-sum", "get-structured-content", "get-tiny-image", "get-env"]) {
      assert.ok(names.includes(name), `missing ${name} in ${names}`);
    }
    const status = pool.status("everything");
    assert.equal(status.state, "ready");
    assert.equal(status.restarts, 0);
    assert.equal(status.transport, "stdio");
    assert.ok(status.pid && alive(status.pid));
  } finally {
    await pool.close();
  }
});

Deno.test("callTool() returns echo, sums, structured content, images and errors from server-everything", async () => {
  const pool = new UpstreamPool([everything()]);
  try {
    assert.equal(textOf(await pool.callTool("everything", "echo", { message: "hi" })), "Echo: hi");
    assert.equal(
      textOf(await pool.callTool("everything", "get-sum", { a: 2, b: 3 })),
      "The sum of 2 and 3 is 5.",
    );
    const weather = await pool.callToolReply("everything", "get-structured-content", { location: "Chicago" });
    const structured = weather.result.structuredContent as Record<string, unknown>;
    assert.deepEqual(Object.keys(structured).sort(), ["conditions", "humidity", "temperature"]);
    // The lean path keeps the server's response text, whose result is the one checked.
    assert.deepEqual(JSON.parse(weather.json!).result.structuredContent, structured);

    const image = (await pool.callTool("everything", "get-tiny-image", {})).content;
    assert.equal(image.length, 3);
    assert.equal(image[0].type, "text");
    const png = image[1] as { type: string; data: string; mimeType: string };
    assert.equal(png.mimeType, "image/png");
    assert.deepEqual([...Buffer.from(png.data, "base64").subarray(1, 4)], [0x50, 0x4e, 0x47]);

    const invalid = await pool.callToolReply("everything", "echo", {});
    assert.equal(invalid.result.isError, true);
    assert.equal(invalid.json, undefined, "an error's text is redacted, so its reply is not passed through");
    assert.throws(() => toolResultForPython(invalid, false), (error: Error) => {
      return error instanceof ToolError && /message/.test(error.message);
    });
  } finally {
    await pool.close();
  }
});

Deno.test("stdio servers get the safe base environment plus their own env, never host secrets", async () => {
  process.env.CODEMODE_TEST_SECRET_TOKEN = "hunter2";
  const pool = new UpstreamPool([everything("everything", { env: { CONFIGURED: "yes" } })]);
  try {
    const env = decoded(await pool.callTool("everything", "get-env", {})) as Record<string, string>;
    assert.equal(env.CONFIGURED, "yes");
    assert.equal(env.PATH, process.env.PATH);
    assert.equal(env.CODEMODE_TEST_SECRET_TOKEN, undefined);
  } finally {
    delete process.env.CODEMODE_TEST_SECRET_TOKEN;
    await pool.close();
  }
});

Deno.test("server-filesystem reads a 6 MB file and server-memory keeps a graph through the pool", async () => {
  const dir = await Deno.makeTempDir();
  const pool = new UpstreamPool([
    {
      name: "fs",
      transport: "stdio",
      command: "node",
      args: [`${modules}server-filesystem/dist/index.js`, dir],
      source,
    },
    {
      name: "memory",
      transport: "stdio",
      command: "node",
      args: [`${modules}server-memory/dist/index.js`],
      env: { MEMORY_FILE_PATH: `${dir}/memory.jsonl` },
      source,
    },
  ]);
  try {
    const content = "0123456789abcdef".repeat(6 * 65536) + "end";
    await Deno.writeTextFile(`${dir}/big.txt`, content);
    const read = await pool.callTool("fs", "read_text_file", { path: `${dir}/big.txt` });
    assert.equal(textOf(read), content);

    await pool.callTool("memory", "create_entities", {
      entities: [{ name: "codemode", entityType: "project", observations: ["calls MCP tools from Python"] }],
    });
    const graph = decoded(await pool.callTool("memory", "read_graph", {})) as {
      entities: { name: string }[];
    };
    assert.deepEqual(graph.entities.map((entity) => entity.name), ["codemode"]);
  } finally {
    await pool.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("100 concurrent echo calls to one server all succeed on one process", async () => {
  const pool = new UpstreamPool([everything()]);
  try {
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => pool.callTool("everything", "echo", { message: `call ${i}` })),
    );
    results.forEach((result, i) => assert.equal(textOf(result), `Echo: call ${i}`));
    assert.equal(pool.status("everything").restarts, 0);
  } finally {
    await pool.close();
  }
});

Deno.test("after the server is SIGKILLed, the next call restarts it and counts the restart", async () => {
  const pool = new UpstreamPool([everything()]);
  try {
    await pool.callTool("everything", "echo", { message: "one" });
    const pid = pool.status("everything").pid!;
    process.kill(pid, "SIGKILL");
    const deadline = Date.now() + 5000;
    while (pool.status("everything").state === "ready" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(pool.status("everything").state, "failed");
    assert.match(pool.status("everything").error!, /signal SIGKILL/);
    assert.equal(textOf(await pool.callTool("everything", "echo", { message: "two" })), "Echo: two");
    const status = pool.status("everything");
    assert.equal(status.restarts, 1);
    assert.notEqual(status.pid, pid);
  } finally {
    await pool.close();
  }
});

Deno.test("a call in flight when the server is killed rejects promptly with the exit", async () => {
  const pool = new UpstreamPool([everything()]);
  try {
    await pool.listTools("everything");
    const pid = pool.status("everything").pid!;
    const call = pool.callTool("everything", "trigger-long-running-operation", { duration: 30, steps: 3 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const killedAt = Date.now();
    process.kill(pid, "SIGKILL");
    await assert.rejects(call, (error: Error) => {
      assert.ok(error instanceof UpstreamExitedError);
      assert.match(
        error.message,
        /"everything" exited \(signal SIGKILL\) during the call to "trigger-long-running/,
      );
      return true;
    });
    assert.ok(Date.now() - killedAt < 3000, `took ${Date.now() - killedAt} ms`);
  } finally {
    await pool.close();
  }
});

Deno.test("close() stops every stdio server process", async () => {
  const pool = new UpstreamPool([everything("a"), everything("b")]);
  await Promise.all([pool.listTools("a"), pool.listTools("b")]);
  const pids = [pool.status("a").pid!, pool.status("b").pid!];
  assert.ok(pids.every(alive));
  await pool.close();
  assert.deepEqual(pids.filter(alive), []);
  assert.equal(pool.status("a").state, "closed");
  await assert.rejects(pool.callTool("a", "echo", { message: "late" }), /closed/);
});

// How fast they are is the proxy benchmark's business (deno task bench --only proxy), not a test's.
Deno.test("500 sequential echo calls through the pool each get their own answer on one connection", async () => {
  const pool = new UpstreamPool([everything()]);
  try {
    await pool.callTool("everything", "echo", { message: "warm-up" });
    const pid = pool.status("everything").pid;
    for (let i = 0; i < 500; i++) {
      const result = await pool.callTool("everything", "echo", { message: `m${i}` });
      const text = (result.content as { type: string; text?: string }[])[0]?.text;
      assert.equal(text, `Echo: m${i}`);
    }
    assert.equal(pool.status("everything").pid, pid, "the server was not restarted");
  } finally {
    await pool.close();
  }
});

Deno.test("remote servers: Streamable HTTP with headers, SSE, and http falling back to an SSE-only endpoint", async () => {
  const streamable = await httpEverything("streamableHttp");
  const sse = await httpEverything("sse");
  // A pass-through proxy in front of the Streamable HTTP server records the headers the client sends.
  const seen: string[] = [];
  const proxy = createServer((req, res) => {
    seen.push(String(req.headers["x-api-key"]));
    const upstream = httpRequest(
      { host: "127.0.0.1", port: streamable.port, path: req.url, method: req.method, headers: req.headers },
      (reply) => {
        res.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(res);
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const proxyPort = (proxy.address() as AddressInfo).port;
  const pool = new UpstreamPool([
    {
      name: "streamable",
      transport: "http",
      url: `http://127.0.0.1:${proxyPort}/mcp`,
      headers: { "X-Api-Key": "k-123" },
      source,
    },
    { name: "sse", transport: "sse", url: `http://127.0.0.1:${sse.port}/sse`, source },
    { name: "fallback", transport: "http", url: `http://127.0.0.1:${sse.port}/sse`, source },
  ]);
  try {
    for (const name of pool.names()) {
      assert.equal(textOf(await pool.callTool(name, "echo", { message: name })), `Echo: ${name}`);
      assert.ok((await pool.listTools(name)).some((tool) => tool.name === "get-sum"));
    }
    assert.equal(pool.status("streamable").transport, "http");
    assert.equal(pool.status("sse").transport, "sse");
    assert.equal(pool.status("fallback").transport, "sse");
    assert.ok(seen.length >= 3);
    assert.deepEqual(seen.filter((key) => key !== "k-123"), []);
    const many = await Promise.all(
      Array.from({ length: 50 }, (_, i) => pool.callTool("streamable", "echo", { message: `${i}` })),
    );
    many.forEach((result, i) => assert.equal(textOf(result), `Echo: ${i}`));
  } finally {
    await pool.close();
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
    await Promise.all([streamable.stop(), sse.stop()]);
  }
});

Deno.test("a remote server that restarts is reconnected on the next call", async () => {
  let server = await httpEverything("streamableHttp");
  const pool = new UpstreamPool([
    { name: "remote", transport: "http", url: `http://127.0.0.1:${server.port}/mcp`, source },
  ]);
  try {
    assert.equal(textOf(await pool.callTool("remote", "echo", { message: "one" })), "Echo: one");
    await server.stop();
    await assert.rejects(pool.callTool("remote", "echo", { message: "lost" }), (error: Error) => {
      assert.ok(error instanceof UpstreamExitedError);
      assert.match(
        error.message,
        /"remote" lost the connection .* during the call to "echo"; the next call reconnects/,
      );
      return true;
    });
    assert.equal(pool.status("remote").state, "failed");
    server = await httpEverything("streamableHttp", server.port);
    assert.equal(textOf(await pool.callTool("remote", "echo", { message: "two" })), "Echo: two");
    assert.equal(pool.status("remote").restarts, 1);
  } finally {
    await pool.close();
    await server.stop();
  }
});
