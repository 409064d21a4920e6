/**
 * Tool results on their way to Python: what the host keeps back (toolResultForPython), and how the
 * sandbox unwraps a reply the host passed through (sandbox/codemode_runtime/tool_results.py, run with
 * the local python3).
 */
import assert from "node:assert/strict";
import type { CallToolResult } from "@modelcontextprotocol/client";
import {
  MAX_VALUE_DEPTH,
  nestingDepth,
  ToolError,
  toolResultForPython,
  ToolResultReply,
} from "../../core/host_api/tool_result.ts";
import { RpcError } from "../../core/host_api/rpc.ts";
import { withPython } from "./_local_python.ts";

const text = (value: string) => ({ type: "text" as const, text: value });
const result = (content: unknown[], extra: Record<string, unknown> = {}) =>
  ({ content, ...extra }) as unknown as CallToolResult;

Deno.test("toolResultForPython() passes the server's response text through, or the result serialised", () => {
  const json = '{"result":{"content":[{"type":"text","text":"5.0"}]},"jsonrpc":"2.0","id":"codemode-1"}';
  const passed = toolResultForPython({ result: result([text("5.0")]), json }, false);
  assert.ok(passed instanceof ToolResultReply);
  assert.equal(passed.json, json);
  assert.equal(passed.raw, false);
  const serialised = toolResultForPython({ result: result([text("x")]) }, true);
  assert.equal(serialised.json, '{"result":{"content":[{"type":"text","text":"x"}]}}');
  assert.equal(serialised.raw, true);
});

Deno.test("toolResultForPython() raises isError results as ToolError with the server's text, unless raw", () => {
  const failed = result([text("the widget is broken"), text("try later")], { isError: true });
  assert.throws(() => toolResultForPython({ result: failed }, false), (error: Error) => {
    assert.ok(error instanceof ToolError);
    assert.equal(error.name, "ToolError");
    assert.equal(error.message, "the widget is broken\ntry later");
    assert.equal((error as ToolError).result, failed);
    return true;
  });
  assert.throws(
    () => toolResultForPython({ result: result([], { isError: true }) }, false),
    /without a message/,
  );
  assert.throws(
    () =>
      toolResultForPython(
        { result: result([], { isError: true, structuredContent: { code: "E42" } }) },
        false,
      ),
    /"code":"E42"/,
  );
  assert.ok(toolResultForPython({ result: failed }, true) instanceof ToolResultReply);
});

Deno.test("toolResultForPython() refuses a result nested deeper than Python's decoder goes", () => {
  let deep: unknown = {};
  for (let i = 0; i < MAX_VALUE_DEPTH + 10; i++) deep = { n: deep };
  assert.throws(
    () => toolResultForPython({ result: result([], { structuredContent: deep }) }, false),
    (error: Error) =>
      error instanceof RpcError && error.pythonType === "ToolError" &&
      /nested more than 500 levels/.test(error.message),
  );
});

Deno.test("nestingDepth() measures any depth without recursion", () => {
  assert.equal(nestingDepth("x"), 0);
  assert.equal(nestingDepth({ a: [1, { b: 2 }] }), 3);
  let deep: unknown = 1;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.equal(nestingDepth(deep), 100_000);
  assert.equal(nestingDepth(deep, 10), 11);
});

/** The repr of what `await mcp_my_server.echo()` gives when the host answers with `reply` (JSON text). */
async function unwrapped(replies: string[], raw = false): Promise<string[]> {
  const values: string[] = [];
  await withPython(async (python) => {
    for (const reply of replies) {
      const run = await python.execute(`r = await mcp_my_server.echo(raw=${raw ? "True" : "False"})\nr`, {
        answer: () => ({ reply, raw }),
      });
      values.push(run.done.value ?? run.done.error ?? "");
    }
  });
  return values;
}

const reply = (result: unknown) => JSON.stringify({ result, jsonrpc: "2.0", id: "codemode-1" });

Deno.test("the sandbox prefers structuredContent, decodes JSON text and keeps other text", async () => {
  assert.deepEqual(
    await unwrapped([
      reply(result([text('{"a":1}')], { structuredContent: { b: 2 } })),
      reply(result([text('{"rows":[1,2]}')])),
      reply(result([text("42")])),
      reply(result([text("Echo: hi")])),
      reply(result([text("00123")])),
      reply(result([text("NaN")])),
      reply(result([text("one"), text("two")])),
      reply(result([text("[1,"), text("2]")])),
      reply(result([])),
      reply({}),
    ]),
    ["{'b': 2}", "{'rows': [1, 2]}", "42", "'Echo: hi'", "'00123'", "'NaN'", "'one\\ntwo'", "[1, 2]", "", ""],
  );
});

Deno.test("the sandbox decodes numbers exactly as json.loads does: 5.0 stays a float, big integers exact", async () => {
  const [values] = await unwrapped([
    // Spliced as text: JSON.stringify would already turn 5.0 into 5 and round 2**64.
    '{"result":{"content":[],"structuredContent":{"f":5.0,"big":18446744073709551616,"e":1e2,"z":-0.0}},' +
    '"jsonrpc":"2.0","id":"x"}',
  ]);
  assert.equal(values, "{'f': 5.0, 'big': 18446744073709551616, 'e': 100.0, 'z': -0.0}");
  assert.deepEqual(await unwrapped([reply(result([text("[5.0, 9007199254740993]")]))]), [
    "[5.0, 9007199254740993]",
  ]);
});

Deno.test("the sandbox turns images, audio and blob resources into MimeBytes in a list", async () => {
  const [value] = await unwrapped([reply(result([
    text("caption"),
    { type: "image", data: "aW1n", mimeType: "image/png" },
    { type: "audio", data: "YXVk", mimeType: "audio/wav" },
    { type: "resource", resource: { uri: "file:///b", blob: "YmxvYg==" } },
    { type: "resource", resource: { uri: "file:///t", text: "hello", mimeType: "text/plain" } },
    { type: "resource_link", uri: "file:///l", name: "l" },
  ]))]);
  assert.equal(
    value,
    "['caption', MimeBytes(<3 bytes>, mime_type='image/png'), MimeBytes(<3 bytes>, mime_type='audio/wav'), " +
      "MimeBytes(<4 bytes>, mime_type='application/octet-stream'), " +
      "{'type': 'resource', 'resource': {'uri': 'file:///t', 'text': 'hello', 'mimeType': 'text/plain'}}, " +
      "{'type': 'resource_link', 'uri': 'file:///l', 'name': 'l'}]",
  );
});

Deno.test("raw=True gives the whole result with base64 fields as MimeBytes in place", async () => {
  const [value] = await unwrapped([reply(result([
    text("t"),
    { type: "image", data: "aW1n", mimeType: "image/png" },
    { type: "resource", resource: { uri: "file:///b", blob: "YmxvYg==", mimeType: "application/zip" } },
  ], { isError: false, structuredContent: { s: 1 }, _meta: { m: true } }))], true);
  assert.equal(
    value,
    "{'content': [{'type': 'text', 'text': 't'}, {'type': 'image', 'data': MimeBytes(<3 bytes>, " +
      "mime_type='image/png'), 'mimeType': 'image/png'}, {'type': 'resource', 'resource': {'uri': 'file:///b', " +
      "'blob': MimeBytes(<4 bytes>, mime_type='application/zip'), 'mimeType': 'application/zip'}}], " +
      "'isError': False, 'structuredContent': {'s': 1}, '_meta': {'m': True}}",
  );
});

Deno.test("JSON text too deep for Python's decoder raises ToolError instead of crashing the run", async () => {
  const deep = "[".repeat(5000) + "]".repeat(5000);
  const [value] = await unwrapped([reply(result([text(deep)]))]);
  assert.match(value, /mcp\.ToolError: The tool's JSON text is nested too deeply/);
});
