import assert from "node:assert/strict";
import { decode } from "@toon-format/toon";
import { compact } from "../../plugins/output/compact.ts";
import { toon } from "../../plugins/output/toon.ts";
import { json } from "../../plugins/output/json.ts";
import type { RunResult } from "../../core/contracts/output.ts";

const printed: RunResult = { status: "ok", stdout: "hello\n", stderr: "", duration: 0.0123 };
const failed: RunResult = {
  status: "error",
  stdout: "a\nb\n",
  stderr: "",
  error: "Traceback (most recent call last):\nValueError: x",
  duration: 0.5,
  notes: ["stdout truncated"],
};

Deno.test("compact() shows only what a run printed when that is all there is", () => {
  assert.equal(compact().render(printed).text, "hello\n");
  assert.equal(compact().render({ ...printed, stdout: "", value: "42" }).text, "42");
  assert.equal(compact().render({ ...printed, stdout: "" }).text, "(no output)");
});

Deno.test("compact() labels sections and drops empty fields", () => {
  const text = compact().render(failed).text;
  assert.equal(
    text,
    "status: error\nstdout:\na\nb\nerror:\nTraceback (most recent call last):\nValueError: x\nnote: stdout truncated",
  );
});

Deno.test("every output plugin mirrors the same structured content with empty fields dropped", () => {
  for (const plugin of [compact(), toon(), json()]) {
    const { structured } = plugin.render(failed);
    assert.deepEqual(structured, {
      status: "error",
      stdout: "a\nb\n",
      error: "Traceback (most recent call last):\nValueError: x",
      notes: ["stdout truncated"],
      duration: 0.5,
    });
    assert.equal("stderr" in structured, false);
  }
});

Deno.test("toon() and json() texts decode back to the structured content", () => {
  const t = toon().render(failed);
  assert.deepEqual(decode(t.text), t.structured);
  const j = json().render({ ...printed, sessionLost: true });
  assert.deepEqual(JSON.parse(j.text), j.structured);
  assert.equal(j.structured.session_lost, true);
});
