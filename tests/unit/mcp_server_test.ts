import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import { CAPABILITIES_URI, type CodeRunner, createMcpServer } from "../../core/mcp_server.ts";
import { compact } from "../../plugins/output/compact.ts";
import type { RunResult } from "../../core/contracts/output.ts";

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
    "timeout lowered to the 120s maximum",
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
    (names) => Promise.resolve(names.filter((n) => n !== "memory")),
  );
  const r = await client.callTool({
    name: "run_python",
    arguments: { code: "1", servers: ["memory", "nope"] },
  });
  assert.equal(r.isError, true);
  assert.match((r.content as { text: string }[])[0].text, /Unknown server\(s\): "nope"/);
  assert.equal(calls.length, 0);
  await close();
});

Deno.test("the capabilities resource is listed and readable", async () => {
  const { client, close } = await connect(fakeRunner(() => ok("")).runner);
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.uri), [CAPABILITIES_URI]);
  const read = await client.readResource({ uri: CAPABILITIES_URI });
  assert.equal((read.contents[0] as { text: string }).text, "# caps\n");
  await close();
});
