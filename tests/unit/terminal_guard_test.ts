/** Terminal safety: server, config and sandbox text reaches a terminal with every control escaped. */
import assert from "node:assert/strict";
import pc from "picocolors";
import { escapeControls, escapeDeep, guardText, safeJson } from "../../cli/_terminal_guard.ts";
import { ESCAPES } from "../testdata/servers/hostile_server.ts";

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

Deno.test("escapeControls() escapes every C0, C1, DEL and bidi override, and keeps newlines, tabs and text", () => {
  const text = `a${ESCAPES}\u202etxt.exe\u2066b\tc\nd é 漢`;
  const escaped = escapeControls(text);
  assert.ok(!CONTROL.test(escaped), JSON.stringify(escaped));
  assert.match(escaped, /\\u001b\]52;c;aGFja2Vk\\u0007/);
  assert.match(escaped, /\\u009b31m\\u009d0;c1title\\u009c/);
  assert.match(escaped, /\\u202etxt\.exe\\u2066b\tc\nd é 漢$/);
  assert.equal(escapeControls("plain text"), "plain text");
});

Deno.test("guardText() lets codemode's own colours through and nothing else", () => {
  const own = pc.createColors(true);
  const ours = `${own.bold("head")} ${own.green("✓")} ${own.red(own.dim("x"))} ${own.cyan("srv")}`;
  assert.equal(guardText(ours), ours);
  const theirs = guardText(`${ESCAPES}\x1b[8mhidden\x1b[5;31m\x1b[38;5;9m`);
  // deno-lint-ignore no-control-regex
  assert.ok(!CONTROL.test(theirs.replace(/\x1b\[3[19]m/g, "")), JSON.stringify(theirs));
  assert.match(theirs, /\\u001b\[8mhidden\\u001b\[5;31m\\u001b\[38;5;9m/);
});

Deno.test("safeJson() stays valid JSON that decodes to the same value, with no raw control left", () => {
  const value = { name: `evil${ESCAPES}`, list: ["\u0085", "\u2066"], n: 1 };
  const json = safeJson(value);
  assert.ok(!CONTROL.test(json), json);
  assert.deepEqual(JSON.parse(json), value);
});

Deno.test("escapeDeep() escapes every string of plain objects and arrays, keys too", () => {
  const value = escapeDeep({ [`k\x1b`]: [`v\x07`, { deep: "\u009b" }], n: 2, d: new Date(0) });
  assert.deepEqual(Object.keys(value), ["k\\u001b", "n", "d"]);
  assert.deepEqual(value["k\\u001b" as keyof typeof value], ["v\\u0007", { deep: "\\u009b" }]);
  assert.ok(value.d instanceof Date);
});
