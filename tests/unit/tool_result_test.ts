import assert from "node:assert/strict";
import type { CallToolResult } from "@modelcontextprotocol/client";
import { BYTES_MARKER } from "../../core/host_api/tool_result.ts";
import {
  encodeRawResult,
  encodeWithinLimits,
  nestingDepth,
  ResultLimitError,
  ToolError,
  unwrapToolResult,
} from "../../core/host_api/tool_result.ts";

const text = (value: string) => ({ type: "text" as const, text: value });
const result = (content: unknown[], extra: Record<string, unknown> = {}) =>
  ({ content, ...extra }) as unknown as CallToolResult;

Deno.test("unwrapToolResult() prefers structuredContent over the text", () => {
  assert.deepEqual(unwrapToolResult(result([text('{"a":1}')], { structuredContent: { b: 2 } })), { b: 2 });
});

Deno.test("unwrapToolResult() decodes text that is JSON and keeps text that is not", () => {
  assert.deepEqual(unwrapToolResult(result([text('{"rows":[1,2]}')])), { rows: [1, 2] });
  assert.equal(unwrapToolResult(result([text("42")])), 42);
  assert.equal(unwrapToolResult(result([text("Echo: hi")])), "Echo: hi");
  assert.equal(unwrapToolResult(result([text("00123")])), "00123");
});

Deno.test("unwrapToolResult() joins several text items with newlines before decoding", () => {
  assert.equal(unwrapToolResult(result([text("one"), text("two")])), "one\ntwo");
  assert.deepEqual(unwrapToolResult(result([text("[1,"), text("2]")])), [1, 2]);
});

Deno.test("unwrapToolResult() returns null for a result without content", () => {
  assert.equal(unwrapToolResult(result([])), null);
  assert.equal(unwrapToolResult({} as CallToolResult), null);
});

Deno.test("unwrapToolResult() turns images, audio and blob resources into bytes values in a list", () => {
  const value = unwrapToolResult(result([
    text("caption"),
    { type: "image", data: "aW1n", mimeType: "image/png" },
    { type: "audio", data: "YXVk", mimeType: "audio/wav" },
    { type: "resource", resource: { uri: "file:///b", blob: "YmxvYg==" } },
    { type: "resource", resource: { uri: "file:///t", text: "hello", mimeType: "text/plain" } },
    { type: "resource_link", uri: "file:///l", name: "l" },
  ]));
  assert.deepEqual(value, [
    "caption",
    { [BYTES_MARKER]: "aW1n", mime_type: "image/png" },
    { [BYTES_MARKER]: "YXVk", mime_type: "audio/wav" },
    { [BYTES_MARKER]: "YmxvYg==", mime_type: "application/octet-stream" },
    { type: "resource", resource: { uri: "file:///t", text: "hello", mimeType: "text/plain" } },
    { type: "resource_link", uri: "file:///l", name: "l" },
  ]);
});

Deno.test("unwrapToolResult() throws ToolError with the server's text for isError results", () => {
  const failed = result([text("the widget is broken"), text("try later")], { isError: true });
  assert.throws(() => unwrapToolResult(failed), (error: Error) => {
    assert.ok(error instanceof ToolError);
    assert.equal(error.name, "ToolError");
    assert.equal(error.message, "the widget is broken\ntry later");
    assert.equal((error as ToolError).result, failed);
    return true;
  });
  assert.throws(() => unwrapToolResult(result([], { isError: true })), /without a message/);
  assert.throws(
    () => unwrapToolResult(result([], { isError: true, structuredContent: { code: "E42" } })),
    /"code":"E42"/,
  );
});

Deno.test("encodeRawResult() keeps everything and turns base64 fields into bytes values in place", () => {
  const raw = encodeRawResult(result([
    text("t"),
    { type: "image", data: "aW1n", mimeType: "image/png" },
    { type: "resource", resource: { uri: "file:///b", blob: "YmxvYg==", mimeType: "application/zip" } },
  ], { isError: false, structuredContent: { s: 1 }, _meta: { m: true } }));
  assert.deepEqual(raw, {
    content: [
      text("t"),
      { type: "image", data: { [BYTES_MARKER]: "aW1n", mime_type: "image/png" }, mimeType: "image/png" },
      {
        type: "resource",
        resource: {
          uri: "file:///b",
          blob: { [BYTES_MARKER]: "YmxvYg==", mime_type: "application/zip" },
          mimeType: "application/zip",
        },
      },
    ],
    isError: false,
    structuredContent: { s: 1 },
    _meta: { m: true },
  });
});

Deno.test("encodeRawResult() does not throw for isError results", () => {
  assert.equal(encodeRawResult(result([text("bad")], { isError: true })).isError, true);
});

Deno.test("nestingDepth() measures any depth without recursion", () => {
  assert.equal(nestingDepth("x"), 0);
  assert.equal(nestingDepth({ a: [1, { b: 2 }] }), 3);
  let deep: unknown = 1;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.equal(nestingDepth(deep), 100_000);
  assert.equal(nestingDepth(deep, 10), 11);
});

Deno.test("encodeWithinLimits() returns JSON within the limits and refuses what is too big or too deep", () => {
  assert.equal(encodeWithinLimits({ a: [1] }, { maxBytes: 100, label: "x" }), '{"a":[1]}');
  assert.equal(encodeWithinLimits(undefined, { maxBytes: 100, label: "x" }), "null");
  assert.throws(
    () => encodeWithinLimits("é".repeat(600_000), { maxBytes: 1024 * 1024, label: '"read" on "fs"' }),
    (error: Error) =>
      error instanceof ResultLimitError &&
      error.message === 'The result of "read" on "fs" is 1.1 MiB, over the 1.0 MiB limit; ' +
          "ask the tool for less (a page, a filter, a smaller range)",
  );
  let deep: unknown = {};
  for (let i = 0; i < 600; i++) deep = { n: deep };
  assert.throws(() => encodeWithinLimits(deep, { maxBytes: 1e9, label: "x" }), /nested more than 500 levels/);
  assert.doesNotThrow(() => encodeWithinLimits(deep, { maxBytes: 1e9, maxDepth: 1000, label: "x" }));
});
