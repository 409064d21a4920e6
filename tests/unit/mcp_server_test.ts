import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import {
  CAPABILITIES_URI,
  type CodeRunner,
  createMcpServer,
  STATS_URI,
} from "../../core/serve/mcp_server.ts";
import { compact } from "../../plugins/output/compact.ts";
import type { RunResult } from "../../core/contracts/output.ts";
import type { RunOptions } from "../../core/sandbox/session.ts";
import { log, setLogLevel, setLogSink } from "../../core/observe/log.ts";

/** A runner that records calls and answers from a script: logic-only fake, no sandbox. */
function fakeRunner(answer: (code: string) => RunResult | Error) {
  const calls: { key: string; code: string; timeout: number }[] = [];
  const runner: CodeRunner = {
    run(key, code, { timeout }) {
      calls.push({ key, code, timeout });
      const a = answer(code);
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    },
  };
  return { runner, calls };
}

async function connect(runner: CodeRunner, preload = (_: string[]) => Promise.resolve([] as string[])) {
  const server = createMcpServer({
    runner,
    output: compact(),
    defaultTimeout: 30,
    maxTimeout: 120,
    capabilities: () => "# caps\n",
    preload,
    sessionKey: "k",
    version: "9.9.9",
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: "test", version: "1" });
  await client.connect(b);
  return { client, close: () => Promise.all([client.close(), server.close()]) };
}

const ok = (stdout: string): RunResult => ({ status: "ok", stdout, stderr: "", duration: 0.01 });

Deno.test("createMcpServer() exposes exactly one tool, run_python, with code, timeout and servers", async () => {
  const { client, close } = await connect(fakeRunner(() => ok("")).runner);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ["run_python"]);
  const schema = tools[0].inputSchema as { properties: Record<string, unknown>; required: string[] };
  assert.deepEqual(Object.keys(schema.properties).sort(), ["code", "servers", "timeout"]);
  assert.deepEqual(schema.required, ["code"]);
  await close();
});

Deno.test("the tools/list response costs at most 200 tokens (o200k)", async () => {
  const { client, close } = await connect(fakeRunner(() => ok("")).runner);
  const listed = await client.listTools();
  const tokens = encode(JSON.stringify(listed)).length;
  assert.ok(tokens <= 200, `tools/list is ${tokens} tokens`);
  await close();
});

Deno.test("run_python returns rendered text and mirrored structuredContent", async () => {
  const { runner, calls } = fakeRunner(() => ok("hi\n"));
  const { client, close } = await connect(runner);
  const result = await client.callTool({ name: "run_python", arguments: { code: "print('hi')" } });
  assert.deepEqual(result.content, [{ type: "text", text: "hi\n" }]);
  assert.deepEqual(result.structuredContent, { status: "ok", stdout: "hi\n", duration: 0.01 });
  assert.ok(!result.isError);
  assert.deepEqual(calls, [{ key: "k", code: "print('hi')", timeout: 30 }]);
  await close();
});

Deno.test("run_python caps the timeout at the maximum and says so", async () => {
  const { runner, calls } = fakeRunner(() => ok(""));
  const { client, close } = await connect(runner);
  const result = await client.callTool({ name: "run_python", arguments: { code: "1", timeout: 999 } });
  assert.equal(calls[0].timeout, 120);
  assert.deepEqual((result.structuredContent as { notes: string[] }).notes, [
    "timeout lowered to the 120s maximum (CODEMODE_MAX_TIMEOUT); for longer work use runtime.start_job() or " +
    "call run_python as an MCP task",
  ]);
  await close();
});

Deno.test("run_python marks raised code, timeouts and runner failures as isError", async () => {
  const { runner } = fakeRunner((code) =>
    code === "boom"
      ? new Error("No sandbox runtime is usable")
      : { status: code === "raise" ? "error" : "timeout", stdout: "", stderr: "", error: "x", duration: 1 }
  );
  const { client, close } = await connect(runner);
  for (const code of ["raise", "loop"]) {
    const r = await client.callTool({ name: "run_python", arguments: { code } });
    assert.equal(r.isError, true);
  }
  const r = await client.callTool({ name: "run_python", arguments: { code: "boom" } });
  assert.equal(r.isError, true);
  assert.match(
    (r.content as { text: string }[])[0].text,
    /No sandbox runtime is usable\. Run `codemode doctor`/,
  );
  await close();
});

Deno.test("run_python refuses unknown servers before running anything", async () => {
  const { runner, calls } = fakeRunner(() => ok(""));
  const { client, close } = await connect(
    runner,
    (names) => Promise.resolve(names.filter((n) => n !== "memory").map((n) => `Unknown server "${n}"`)),
  );
  const r = await client.callTool({
    name: "run_python",
    arguments: { code: "1", servers: ["memory", "nope"] },
  });
  assert.equal(r.isError, true);
  assert.match(
    (r.content as { text: string }[])[0].text,
    /Unknown server "nope"; see runtime\.discovered_servers\(\)/,
  );
  assert.equal(calls.length, 0);
  await close();
});

Deno.test("the capabilities resource is listed and readable", async () => {
  const { client, close } = await connect(fakeRunner(() => ok("")).runner);
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.uri), [CAPABILITIES_URI, STATS_URI]);
  const read = await client.readResource({ uri: CAPABILITIES_URI });
  assert.equal((read.contents[0] as { text: string }).text, "# caps\n");
  await close();
});

/** A runner that hands each call's options to `body`, which plays the sandbox. */
function scriptedRunner(body: (options: RunOptions) => Promise<RunResult>) {
  const seen: RunOptions[] = [];
  const runner: CodeRunner = {
    run(_key, _code, options) {
      seen.push(options);
      return body(options);
    },
  };
  return { runner, seen };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("the stats resource is JSON with this process's runs, sandboxes and upstream calls", async () => {
  const { client, close } = await connect(fakeRunner(() => ok("")).runner);
  const read = await client.readResource({ uri: STATS_URI });
  const snapshot = JSON.parse((read.contents[0] as { text: string }).text);
  assert.equal(snapshot.pid, process.pid);
  for (const key of ["runs", "sandboxes", "rpc", "upstream", "malformedFrames"]) {
    assert.ok(key in snapshot, key);
  }
  await close();
});

Deno.test("each run gets a request id that its log lines carry, and that differs between calls", async () => {
  const lines: string[] = [];
  setLogLevel("debug");
  setLogSink((line) => lines.push(line));
  try {
    const { runner, seen } = scriptedRunner(async () => {
      await sleep(1);
      log.debug("deep inside the run");
      return ok("");
    });
    const { client, close } = await connect(runner);
    await client.callTool({ name: "run_python", arguments: { code: "1" } });
    await client.callTool({ name: "run_python", arguments: { code: "2" } });
    await close();
    const ids = seen.map((o) => o.requestId);
    assert.equal(new Set(ids).size, 2);
    assert.match(ids[0]!, /^k\.\d+\.[a-z0-9]+$/, "session key, MCP request id, random part");
    const deep = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === "deep inside the run");
    assert.deepEqual(deep.map((l) => l.requestId), ids);
  } finally {
    setLogLevel("warn");
    setLogSink((line) => process.stderr.write(line + "\n"));
  }
});

Deno.test("with a progress token, output arrives as progress notifications before the result", async () => {
  const { runner } = scriptedRunner(async ({ onOutput }) => {
    assert.ok(onOutput, "the runner is given an output listener");
    for (const line of ["one\n", "two\n", "three\n"]) {
      onOutput("stdout", line);
      await sleep(300);
    }
    return ok("one\ntwo\nthree\n");
  });
  const { client, close } = await connect(runner);
  const progress: { progress: number; message?: string }[] = [];
  const result = await client.callTool(
    { name: "run_python", arguments: { code: "..." } },
    { onprogress: (p) => progress.push(p) },
  );
  assert.equal(progress.map((p) => p.message).join(""), "one\ntwo\nthree\n");
  assert.ok(progress.length >= 2, `output was streamed in ${progress.length} notification(s)`);
  const counts = progress.map((p) => p.progress);
  assert.deepEqual(counts, [...counts].sort((a, b) => a - b), "progress only grows");
  assert.ok(!result.isError);
  await close();
});

Deno.test("without a progress token the runner is given no output listener", async () => {
  const { runner, seen } = scriptedRunner(() => Promise.resolve(ok("")));
  const { client, close } = await connect(runner);
  await client.callTool({ name: "run_python", arguments: { code: "1" } });
  assert.equal(seen[0].onOutput, undefined);
  await close();
});

Deno.test("cancelling the request aborts the signal the runner was given", async () => {
  let aborted = false;
  const { runner } = scriptedRunner(({ signal }) =>
    new Promise<RunResult>((resolve) => {
      signal!.addEventListener("abort", () => {
        aborted = true;
        resolve({ status: "cancelled", stdout: "", stderr: "", duration: 0.1 });
      });
    })
  );
  const { client, close } = await connect(runner);
  const controller = new AbortController();
  const call = client.callTool({ name: "run_python", arguments: { code: "while True: pass" } }, {
    signal: controller.signal,
  });
  await sleep(50);
  controller.abort("user pressed stop");
  await assert.rejects(call);
  for (let i = 0; i < 50 && !aborted; i++) await sleep(10);
  assert.ok(aborted, "the run's signal was aborted");
  await close();
});

Deno.test("log lines of a run reach the client as logging messages at the level it set", async () => {
  const { runner } = scriptedRunner(() => {
    log.info("sandbox ready", { sandbox: "s1" });
    log.warn("upstream server ended", { server: "x" });
    log.debug("upstream call", { server: "x", tool: "t" });
    return Promise.resolve(ok(""));
  });
  const { client, close } = await connect(runner);
  const heard: { level: string; data: Record<string, unknown> }[] = [];
  client.setNotificationHandler("notifications/message", (n) => {
    heard.push(n.params as { level: string; data: Record<string, unknown> });
  });
  await client.callTool({ name: "run_python", arguments: { code: "1" } });
  await sleep(20);
  assert.deepEqual(heard.map((h) => h.data.msg), ["upstream server ended"], "warning and above by default");
  heard.length = 0;
  await client.setLoggingLevel("info");
  await client.callTool({ name: "run_python", arguments: { code: "2" } });
  await sleep(20);
  assert.deepEqual(heard.map((h) => [h.level, h.data.msg]), [
    ["info", "run_python started"],
    ["info", "sandbox ready"],
    ["warning", "upstream server ended"],
    ["info", "run_python finished"],
  ]);
  assert.ok(heard.every((h) => typeof h.data.requestId === "string"));
  await close();
});

Deno.test("arguments that do not fit run_python's schema come back as a tool error; an unknown tool is a protocol error", async () => {
  const { runner, calls } = fakeRunner(() => ok(""));
  const { client, close } = await connect(runner);
  const bad = await client.callTool({ name: "run_python", arguments: { code: "1", timeout: -1 } });
  assert.equal(bad.isError, true);
  assert.match((bad.content as { text: string }[])[0].text, /^Input validation error: .*timeout: Too small/);
  assert.equal(calls.length, 0);
  await assert.rejects(client.callTool({ name: "run_shell", arguments: {} }), /Tool run_shell not found/);
  await close();
});
