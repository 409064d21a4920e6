/**
 * Values reach sandbox code exactly as Python's `json.loads` of the server's text gives them, on the
 * fast path (lean_calls.ts, the reply passed through) and on the old one (the SDK client's callTool):
 * random JSON documents (nesting, unicode and escapes, integers past 2**53, floats such as 5.0, -0.0 and
 * 1e308, nulls, integer-like keys) go through a real server, the real host API and a real podman
 * sandbox, and Python compares each value with the expected one by type, value, sign and key order.
 *
 * Text results are exact on both paths (their text is a string either way). Structured content is
 * exact on the fast path; the SDK path decodes it in JavaScript first, so there it is what
 * `JSON.stringify(JSON.parse(text))` says (5.0 becomes 5, 2**64 is rounded, integer keys move first),
 * and the two paths agree on every document that round trip leaves unchanged.
 *
 * Both frame paths between host and sandbox carry them: podman's direct channel (fd 3) and the sandbox's
 * stdio, which gVisor sandboxes use (their channel is off).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { Policy } from "../../core/config/policy.ts";
import { sandboxApi, type ToolCaller } from "../../core/host_api/api.ts";
import { toolResultForPython } from "../../core/host_api/tool_result.ts";
import { UpstreamPool } from "../../core/upstream/pool.ts";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { bootstrapFrame } from "../../sandbox/source.ts";
import { assertNoLeftovers, sessions, TEST_IMAGE } from "./_harness.ts";

const channel = podman();
const usable = (await channel.detect()).available && await channel.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED tool values test: podman or image ${TEST_IMAGE} missing`);
/** Frames over the direct channel (podman's default), and over stdio (as on gVisor). */
const FRAME_PATHS = [["the direct channel", channel], [
  "stdio frames",
  podman({ directChannel: false }),
]] as const;

const SERVER = new URL("../testdata/servers/reflect_server.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const source = { plugin: "test", file: "test", key: "test" };
const reflect = (name: string): ServerSpec => ({
  name,
  transport: "stdio",
  command: Deno.execPath(),
  args: ["run", "-A", "--config", CONFIG, SERVER],
  source,
});

/** mulberry32: the same documents on every run, and another seed finds others. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NUMBERS = [
  "0",
  "-0",
  "7",
  "-42",
  "9007199254740993",
  "18446744073709551616",
  "-123456789012345678901234567890",
  "5.0",
  "-0.0",
  "0.1",
  "1e2",
  "1E-7",
  "-2.5e+3",
  "1e308",
  "1.7976931348623157e308",
  "5e-324",
  "123.456000",
];
const CHARS = [
  "a",
  "Z",
  " ",
  "é",
  "中",
  "😀",
  "\\n",
  "\\t",
  '\\"',
  "\\\\",
  "\\/",
  "\\b",
  "\\f",
  "\\r",
  "\\u0000",
  "\\u00e9",
  "\\ud83d\\ude00",
  "\\ud800",
  "\\u2028",
];
const KEYS = ['"a"', '"b"', '"1"', '"0"', '"10"', '"é"', '""', '"a"'];

/** A JSON document written as text, the way a server might write it (no newline: one reply line). */
function documentText(next: () => number, top: "object" | "any"): string {
  const pick = <T>(xs: T[]) => xs[Math.floor(next() * xs.length)];
  const space = () => (next() < 0.2 ? pick([" ", "\t", "\r", "  "]) : "");
  const string = () => `"${Array.from({ length: Math.floor(next() * 6) }, () => pick(CHARS)).join("")}"`;
  const value = (depth: number): string => {
    const kind = depth > 5 ? Math.floor(next() * 4) : Math.floor(next() * 6);
    switch (kind) {
      case 0:
        return pick(["null", "true", "false"]);
      case 1:
        return pick(NUMBERS);
      case 2:
        return string();
      case 3:
        return next() < 0.5 ? string() : pick(NUMBERS);
      case 4:
        return `[${
          Array.from({ length: Math.floor(next() * 4) }, () => space() + value(depth + 1) + space()).join(",")
        }]`;
      default:
        return object(depth);
    }
  };
  const object = (depth: number): string =>
    `{${
      Array.from(
        { length: Math.floor(next() * 4) },
        () => `${space()}${next() < 0.5 ? pick(KEYS) : string()}${space()}:${space()}${value(depth + 1)}`,
      ).join(",")
    }}`;
  return space() + (top === "object" ? object(0) : value(0)) + space();
}

/** What the SDK path makes of a structured document: JavaScript's own decode and encode. */
const throughJavaScript = (text: string) => JSON.stringify(JSON.parse(text));

const CHECK = `
import base64, json, math
cases = json.loads(base64.b64decode(CASES).decode())

def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a == b and math.copysign(1, a) == math.copysign(1, b)) or (a != a and b != b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b

def not_json(constant):
    raise ValueError(constant)

def expected(text):
    # What "JSON-decoded when it is JSON" means: one JSON document; NaN and Infinity are not JSON.
    try:
        return json.loads(text, parse_constant=not_json)
    except ValueError:
        return text

wrong = []
for i, (text, mode, fast_text, old_text) in enumerate(cases):
    fast = await mcp_fast.reflect(json=text, mode=mode)
    old = await mcp_old.reflect(json=text, mode=mode)
    if not same(fast, expected(fast_text)):
        wrong.append(("fast", i, mode, text, repr(fast)))
    if not same(old, expected(old_text)):
        wrong.append(("old", i, mode, text, repr(old)))
    if fast_text == old_text and not same(fast, old):
        wrong.append(("paths differ", i, mode, text, repr(fast), repr(old)))
print(json.dumps({"checked": len(cases), "wrong": wrong[:5], "count": len(wrong)}))
`;

for (const [framing, runtime] of FRAME_PATHS) {
  Deno.test({
    name:
      `random JSON documents reach Python exactly as json.loads gives them, on the fast path and the SDK path, over ${framing}`,
    ignore: !usable,
    fn: () => fuzz(runtime),
  });
}

async function fuzz(runtime: RuntimePlugin): Promise<void> {
  const fast = new UpstreamPool([reflect("fast")]);
  const old = new UpstreamPool([reflect("old")], { leanCalls: false });
  const pools = { fast, old } as Record<string, UpstreamPool>;
  const caller: ToolCaller = {
    names: () => ["fast", "old"],
    spec: (name) => pools[name].spec(name),
    listTools: (name) => pools[name].listTools(name),
    callToolReply: (name, tool, args, options) => pools[name].callToolReply(name, tool, args, options),
  };
  const rpc = sandboxApi(caller, { search: () => [], docs: () => [] }, toolResultForPython, new Policy());
  const servers = [{ name: "fast", alias: "fast" }, { name: "old", alias: "old" }];
  const manager = sessions(runtime, {
    rpc,
    bootstrap: () => bootstrapFrame({ max_output: 1024 * 1024, servers }),
  });
  try {
    const seed = Number(Deno.env.get("CODEMODE_FUZZ_SEED") ?? 32);
    const next = random(seed);
    const cases: [string, string, string, string][] = [];
    for (let i = 0; i < 150; i++) {
      const text = documentText(next, "any");
      cases.push([text, "text", text, text]);
      const object = documentText(next, "object");
      cases.push([object, "structured", object, throughJavaScript(object)]);
    }
    // Text that is not one JSON document stays text on both paths.
    for (const text of ["NaN", "Infinity", "Echo: hi", "00123", "[1,", "", "1 2", "\ufeff[1]"]) {
      cases.push([text, "text", text, text]);
    }
    const code = `CASES = ${JSON.stringify(Buffer.from(JSON.stringify(cases)).toString("base64"))}\n${CHECK}`;
    const result = await manager.run("fuzz", code, { timeout: 120 });
    assert.equal(result.status, "ok", result.error);
    const report = JSON.parse(result.stdout);
    assert.equal(report.checked, cases.length);
    assert.deepEqual(report.wrong, [], `${report.count} values differ (seed ${seed})`);
    // The fast path is no accident: documents whose numbers JavaScript cannot keep were among them.
    assert.ok(cases.some(([text, mode, , oldText]) =>
      mode === "structured" && text.includes("5.0") &&
      oldText !== text
    ));
  } finally {
    await manager.closeAll();
    await fast.close();
    await old.close();
    await assertNoLeftovers(runtime);
  }
}
