import assert from "node:assert/strict";
import { CARRIED_ONCE_CHARS, structuredContent } from "../../core/serve/structured_content.ts";
import { compact } from "../../plugins/output/compact.ts";
import { json } from "../../plugins/output/json.ts";
import { resultContent } from "../../core/serve/display_content.ts";
import type { RunResult } from "../../core/contracts/output.ts";

const large = "x".repeat(CARRIED_ONCE_CHARS);
const run = (fields: Partial<RunResult>): RunResult => ({
  status: "ok",
  stdout: "",
  stderr: "",
  duration: 0.5,
  ...fields,
});
const structuredOf = (result: RunResult, plugin = compact()) => {
  const rendered = plugin.render(result);
  const content = resultContent(result, rendered);
  return { content, structured: structuredContent(rendered, content) };
};

Deno.test("a large stdout that is the whole text travels once: in the text item", () => {
  const { content, structured } = structuredOf(run({ stdout: large }));
  assert.deepEqual(content, [{ type: "text", text: large }]);
  assert.deepEqual(structured, { status: "ok", duration: 0.5, stdout_in_text: true });
});

Deno.test("a large value that is the whole text travels once", () => {
  const { structured } = structuredOf(run({ value: large }));
  assert.deepEqual(structured, { status: "ok", duration: 0.5, value_in_text: true });
});

Deno.test("a small stdout stays in both places", () => {
  const { structured } = structuredOf(run({ stdout: "x".repeat(CARRIED_ONCE_CHARS - 1) }));
  assert.equal(structured.stdout, "x".repeat(CARRIED_ONCE_CHARS - 1));
  assert.equal(structured.stdout_in_text, undefined);
});

Deno.test("a large stdout beside anything else stays in structuredContent: the text is not it alone", () => {
  for (const extra of [{ stderr: "warning" }, { value: "3" }, { notes: ["stdout truncated: 5 bytes"] }]) {
    const { structured } = structuredOf(run({ stdout: large, ...extra }));
    assert.equal(structured.stdout, large, JSON.stringify(extra));
  }
  // The JSON format's text is the whole structured result, not the stdout alone.
  assert.equal(structuredOf(run({ stdout: large }), json()).structured.stdout, large);
});

Deno.test("a result with images keeps its stdout in structuredContent", () => {
  const result = run({
    stdout: large,
    displays: [{ mimeType: "image/png", size: 3, data: "AAAA", offset: 10 }],
  });
  const { content, structured } = structuredOf(result);
  assert.ok(content.some((item) => item.type === "image"));
  assert.equal(structured.stdout, large);
});
