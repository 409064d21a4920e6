import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  DisplayCollector,
  type DisplayFrame,
  formatBytes,
  MAX_DISPLAYS,
} from "../../core/sandbox/displays.ts";
import { compact } from "../../plugins/output/compact.ts";
import { json } from "../../plugins/output/json.ts";
import { resultContent } from "../../core/serve/display_content.ts";
import type { Display, RunResult } from "../../core/contracts/output.ts";

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);
const png = (bytes = PNG): DisplayFrame => ({
  type: "display",
  mime: "image/png",
  size: bytes.length,
  data: bytes.toString("base64"),
  text: "<Figure>",
});
const text = (value: string, mime = "text/plain"): DisplayFrame => ({
  type: "display",
  mime,
  size: Buffer.byteLength(value),
  data: value,
});

Deno.test("DisplayCollector keeps valid displays with their stdout offsets", () => {
  const c = new DisplayCollector(1024);
  assert.equal(c.accept(png(), 3), undefined);
  assert.equal(c.accept(text("  a\n0  1"), 10), undefined);
  assert.equal(c.accept(text("<svg/>", "image/svg+xml"), 10), undefined);
  assert.deepEqual(c.result(), {
    displays: [
      { mimeType: "image/png", offset: 3, size: 12, data: PNG.toString("base64"), text: "<Figure>" },
      { mimeType: "text/plain", offset: 10, size: 8, text: "  a\n0  1" },
      { mimeType: "image/svg+xml", offset: 10, size: 6, text: "<svg/>" },
    ],
    notes: [],
  });
});

Deno.test("DisplayCollector reassembles a display sent in chunks", () => {
  const c = new DisplayCollector(1024);
  const all = Buffer.concat([PNG, Buffer.alloc(9, 7)]);
  const first = all.subarray(0, 12).toString("base64");
  const rest = all.subarray(12).toString("base64");
  assert.equal(c.accept({ ...png(all), data: first, more: true }, 0), undefined);
  assert.equal(c.accept({ type: "display", mime: "image/png", size: all.length, data: rest }, 5), undefined);
  const [display] = c.result().displays;
  assert.deepEqual(Buffer.from(display.data!, "base64"), all);
  assert.equal(display.offset, 0);
});

Deno.test("DisplayCollector refuses hostile frames, says why, and keeps nothing of them", () => {
  const cases: [string, DisplayFrame[], RegExp][] = [
    ["a type off the allowlist", [text("<script>", "application/javascript")], /not allowed/],
    ["HTML claimed as an image type", [{ ...text("<b>"), mime: "image/gif" }], /not allowed/],
    ["bad base64", [{ ...png(), data: "iVBO$$==" }], /not valid base64/],
    ["padding inside a chunked display", [{ ...png(), data: "iVA=", more: true }], /not valid base64/],
    ["more data than declared", [{ ...png(), size: 4 }], /larger than declared/],
    ["less data than declared", [{ ...png(), size: 40 }], /smaller than declared/],
    ["a forged PNG", [png(Buffer.from("GIF89a-not-a-png"))], /not image\/png/],
    ["a JPEG that isn't one", [{ ...png(Buffer.from("hello")), mime: "image/jpeg" }], /not image\/jpeg/],
    ["a continuation of another type", [{ ...png(), more: true }, text("x")], /another type or size/],
    ["a dropped display with data", [{ ...text("x"), dropped: true }], /carried data/],
  ];
  for (const [what, frames, reason] of cases) {
    const c = new DisplayCollector(1024);
    const problems = frames.map((frame) => c.accept(frame, 0)).filter(Boolean);
    assert.match(problems.join(";"), reason, what);
    const { displays, notes } = c.result();
    assert.equal(displays.filter((d) => d.data || d.text === "x").length, 0, what);
    assert.match(notes.join(";"), /display frame\(s\) dropped as malformed/, what);
  }
});

Deno.test("DisplayCollector drops what is over the byte cap or the count cap and says so", () => {
  const c = new DisplayCollector(30);
  c.accept(text("a".repeat(20)), 0);
  c.accept(png(), 0); // 12 bytes: over the 10 left
  c.accept(text("b".repeat(10)), 0); // still fits
  c.accept({ type: "display", mime: "image/png", size: 5_000_000, dropped: true }, 0); // dropped in the sandbox
  const { displays, notes } = c.result();
  assert.deepEqual(displays.map((d) => [d.mimeType, d.size, Boolean(d.dropped)]), [
    ["text/plain", 20, false],
    ["image/png", 12, true],
    ["text/plain", 10, false],
    ["image/png", 5_000_000, true],
  ]);
  assert.equal(displays[1].data, undefined);
  assert.deepEqual(notes, [
    "2 display(s) dropped, over the 30 B cap on one run's displays (CODEMODE_MAX_DISPLAY): image/png (12 B), " +
    "image/png (4.8 MiB)",
  ]);

  const many = new DisplayCollector(1024 * 1024);
  for (let i = 0; i < MAX_DISPLAYS + 7; i++) many.accept(text(String(i)), 0);
  const result = many.result();
  assert.equal(result.displays.length, MAX_DISPLAYS);
  assert.deepEqual(result.notes, ["7 more display(s) dropped: a run keeps at most 500"]);
  assert.equal(formatBytes(8 * 1024 * 1024), "8 MiB");
});

const withDisplays = (displays: Display[], extra: Partial<RunResult> = {}): RunResult => ({
  status: "ok",
  stdout: "before\nafter\n",
  stderr: "",
  duration: 0.1,
  displays,
  ...extra,
});
const image: Display = {
  mimeType: "image/png",
  size: 2048,
  data: "iVBORw0KGgo=",
  text: "<Figure>",
  offset: 7,
};
const table: Display = { mimeType: "text/plain", size: 8, text: "   a\n0  1", offset: 13 };

Deno.test("compact() places text displays among the output and splits the text around images", () => {
  const rendered = compact().render(withDisplays([image, table]));
  assert.equal(rendered.text, "before\n[image 1: image/png, 2 KiB]\nafter\n   a\n0  1");
  assert.deepEqual(rendered.parts, ["before", "after\n   a\n0  1"]);
  assert.deepEqual(rendered.structured.displays, [
    { mimeType: "image/png", size: 2048, text: "<Figure>" },
    { mimeType: "text/plain", size: 8, text: "   a\n0  1" },
  ]);
  const failed = compact().render(withDisplays([image], { status: "error", error: "Boom" }));
  assert.equal(
    failed.text,
    "status: error\noutput:\nbefore\n[image 1: image/png, 2 KiB]\nafter\nerror: Boom",
  );
  assert.deepEqual(failed.parts, ["status: error\noutput:\nbefore", "after\nerror: Boom"]);
});

Deno.test("resultContent() puts each image between the text around it, or after the text without parts", () => {
  const result = withDisplays([image, table, { ...image, offset: 13, data: "AAAA", dropped: true }]);
  assert.deepEqual(resultContent(result, compact().render(result)), [
    { type: "text", text: "before" },
    { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
    { type: "text", text: "after\n   a\n0  1" },
  ]);
  const onlyImage = withDisplays([{ ...image, offset: 0 }], { stdout: "" });
  assert.deepEqual(resultContent(onlyImage, compact().render(onlyImage)), [
    { type: "text", text: "[image 1: image/png, 2 KiB]" },
    { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
  ]);
  const rendered = json().render(result);
  assert.deepEqual(resultContent(result, rendered), [
    { type: "text", text: rendered.text },
    { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
  ]);
  assert.deepEqual(resultContent(withDisplays([]), { text: "x", structured: {} }), [{
    type: "text",
    text: "x",
  }]);
});
