/** The caps on a server's tools: each bad tool is left out with a reason, the others are kept. */
import assert from "node:assert/strict";
import { admitTools, jsonSize, TOOL_CAPS } from "../../core/upstream/tool_caps.ts";

const tool = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  inputSchema: { type: "object", properties: {} },
  ...extra,
});

function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < depth; i++) schema = { type: "object", properties: { x: schema } };
  return schema;
}

Deno.test("admitTools() leaves out each tool that breaks a cap and keeps the rest in order", async () => {
  const { tools, problems } = await admitTools([
    tool("good"),
    tool("x".repeat(200)),
    tool("esc\x1b]52;c;aGk=\x07"),
    tool("c1\u009b2J"),
    tool("huge_doc", { description: "d".repeat(TOOL_CAPS.maxDescription + 1) }),
    tool("deep", { inputSchema: nested(300) }),
    tool("wide", {
      inputSchema: { type: "object", properties: { p: { enum: ["v".repeat(TOOL_CAPS.maxSchema)] } } },
    }),
    tool("bad_shape", { inputSchema: { type: "string" } }),
    "not a tool",
    tool("good"),
    tool("also_good", { outputSchema: { type: "object" } }),
  ]);
  assert.deepEqual(tools.map((t) => t.name), ["good", "also_good"]);
  const why = Object.fromEntries(problems.map((p) => [p.tool.slice(0, 8), p.problem]));
  assert.match(why["xxxxxxxx"], /name is longer than 128/);
  assert.match(why["esc\x1b]52;"], /control characters/);
  assert.match(why["c1\u009b2J"], /control characters/);
  assert.match(why["huge_doc"], /description is longer than/);
  assert.match(why["deep"], /nested more than 64 levels/);
  assert.match(why["wide"], /larger than 131072 characters/);
  assert.match(why["bad_shap"], /not a valid MCP tool at inputSchema.type/);
  assert.match(why["#8"], /not a tool object/);
  assert.match(why["good"], /listed twice/);
  assert.ok(problems.every((p) => p.leftOut));
});

Deno.test("admitTools() stops at the tool cap and at the server's total, with one problem each", async () => {
  const many = Array.from({ length: 30 }, (_, i) => tool(`t${i}`, { description: "x".repeat(1000) }));
  const capped = await admitTools(many, { ...TOOL_CAPS, maxTools: 10 });
  assert.equal(capped.tools.length, 10);
  assert.deepEqual(capped.problems.map((p) => p.problem), [
    "20 more tools left out: a server may bring at most 10",
  ]);
  const budget = await admitTools(many, { ...TOOL_CAPS, maxServer: 5_500 });
  assert.equal(budget.tools.length, 5);
  assert.equal(budget.problems.length, 25);
  assert.match(budget.problems[0].problem, /past 5500 characters/);
});

Deno.test("admitTools() keeps tools whose aliases collide, reports the later one, and costs a bounded walk", async () => {
  const { tools, problems } = await admitTools([tool("get-file"), tool("get.file"), tool("get_file")]);
  assert.deepEqual(tools.map((t) => t.name), ["get-file", "get.file", "get_file"]);
  assert.equal(problems.length, 1);
  assert.equal(problems[0].tool, "get.file");
  assert.equal(problems[0].leftOut, false);
  assert.match(problems[0].problem, /alias "get_file" belongs to "get-file"/);
  // A schema of a million nested arrays is refused after the cap's worth of walking, not all of it.
  let deep: unknown = [];
  for (let i = 0; i < 1_000_000; i++) deep = [deep];
  const started = performance.now();
  const refused = await admitTools([tool("deeper", { inputSchema: { type: "object", d: deep } })]);
  assert.equal(refused.tools.length, 0);
  assert.ok(performance.now() - started < 1000, `took ${performance.now() - started} ms`);
});

Deno.test("jsonSize() counts about the characters of a value's JSON and stops early when told", () => {
  const value = { a: "xyz", b: [1, true, null], c: { d: "" } };
  assert.ok(Math.abs(jsonSize(value) - JSON.stringify(value).length) <= 6, `${jsonSize(value)}`);
  assert.ok(jsonSize({ s: "x".repeat(10_000) }, 100) < 20_000);
});
