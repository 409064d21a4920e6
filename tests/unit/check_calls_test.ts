/**
 * The host side of the pre-run check without a sandbox: which calls are certain problems against a
 * tool's schema and the policy (core/host_api/check.ts), and which literals cannot match a schema on any
 * server, lenient ones included (core/catalog/literal_match.ts).
 */
import assert from "node:assert/strict";
import type { Tool } from "@modelcontextprotocol/client";
import { type CheckedCall, checkProgramCalls, findTool } from "../../core/host_api/check.ts";
import { mismatch } from "../../core/catalog/literal_match.ts";
import { Policy } from "../../core/config/policy.ts";

const TOOLS: Record<string, Tool[]> = {
  "my-server": [
    {
      name: "write",
      inputSchema: {
        type: "object",
        properties: { path: { type: "string" }, count: { type: "integer" }, raw: { type: "boolean" } },
        required: ["path"],
      },
    },
    {
      name: "open-ended",
      inputSchema: { type: "object", properties: { a: {} }, additionalProperties: true },
    },
    {
      name: "combined",
      inputSchema: { type: "object", properties: { a: {} }, anyOf: [{ required: ["a"] }] },
    },
    { name: "secret-tool", inputSchema: { type: "object" } },
  ],
};

function deps(overrides: Partial<Parameters<typeof checkProgramCalls>[1]> = {}) {
  return {
    names: () => Object.keys(TOOLS),
    listTools: (name: string) => Promise.resolve(TOOLS[name] ?? []),
    policy: new Policy({ denyTools: ["my-server/secret-tool"] }),
    ...overrides,
  };
}

const call = (fields: Partial<CheckedCall>): CheckedCall => ({
  line: 1,
  col: 1,
  server: "my-server",
  tool: "write",
  via: "proxy",
  keywords: ["path"],
  ...fields,
});

const kinds = async (calls: CheckedCall[], d = deps()) =>
  (await checkProgramCalls(calls, d)).map((f) => `${f.line} ${f.kind}`);

Deno.test("checkProgramCalls() reports only what is certain about keywords", async () => {
  assert.deepEqual(
    await kinds([
      call({ line: 1 }),
      call({ line: 2, keywords: ["path", "raw"] }), // raw= is the proxy's own, and the tool has one too
      call({ line: 3, via: "call_tool", keywords: ["path", "bogus"] }), // call_tool passes every key
      call({ line: 4, tool: "open_ended", keywords: ["anything"] }),
      call({ line: 5, tool: "combined", keywords: ["anything"] }),
      call({ line: 6, keywords: [], dynamic: true }), // **kwargs may hold path
      call({ line: 7, keywords: ["pth"] }), // one problem: the fix names path
      call({ line: 8, keywords: [] }),
      call({ line: 9, keywords: [], positional: 1 }),
      call({ line: 10, tool: "secret_tool", keywords: [] }),
      call({ line: 11, values: { path: 5, count: "7" } }), // "7" reads as a number on a lenient server
    ]),
    [
      "3 unknown-argument",
      "7 unknown-argument",
      "8 missing-argument",
      "9 positional",
      "10 refused",
      "11 bad-value",
    ],
  );
});

Deno.test("checkProgramCalls() leaves alone servers it does not know or cannot list in time", async () => {
  assert.deepEqual(await kinds([call({ server: "added-in-the-session", tool: "x" })]), []);
  assert.deepEqual(
    await kinds([call({ tool: "nope" })], deps({ listTools: () => Promise.reject(new Error("down")) })),
    [],
  );
  const started = performance.now();
  assert.deepEqual(
    await kinds([call({ tool: "nope" })], deps({ listTools: () => new Promise(() => {}), listMs: 50 })),
    [],
  );
  assert.ok(performance.now() - started < 5000);
  // The sandbox has no mcp_my_server2; the host has no such server either: certain.
  assert.deepEqual(await kinds([call({ server: "my_server2", unbound: true })]), ["1 unknown-server"]);
  // The host knows it by alias while the sandbox had nothing by that name: they disagree, so not certain...
  assert.deepEqual(await kinds([call({ server: "my_server", unbound: true })]), []);
  // ...except mcp_servers, which is keyed by name.
  const [misnamed] = await checkProgramCalls(
    [call({ server: "my_server", via: "servers", unbound: true })],
    deps(),
  );
  assert.equal(misnamed.fix, 'write mcp_servers["my-server"] (or mcp_my_server)');
});

Deno.test("mismatch() judges only what no server would accept", () => {
  const cases: [unknown, unknown, boolean][] = [
    ["five", { type: "number" }, true],
    ["5", { type: "number" }, false],
    [" 2.5e3 ", { type: "number" }, false],
    ["2.5", { type: "integer" }, true],
    [2.5, { type: "integer" }, true],
    [2, { type: "integer" }, false],
    [true, { type: "integer" }, false],
    [5, { type: "string" }, true],
    ["yes", { type: "boolean" }, false],
    ["maybe", { type: "boolean" }, true],
    [1, { type: "boolean" }, false],
    ["x", { type: "array" }, true],
    [["x"], { type: "object" }, true],
    [null, { type: "string" }, false],
    ["warn", { enum: ["error", "info"] }, true],
    ["error", { enum: ["error", "info"] }, false],
    [3, { enum: ["3", 4] }, false],
    ["x", { anyOf: [{ type: "number" }, { type: "boolean" }] }, true],
    ["x", { anyOf: [{ type: "number" }, { type: "string" }] }, false],
    [[1, "a"], { type: "array", items: { type: "integer" } }, true],
    [{ n: "a" }, {
      type: "object",
      properties: { n: { $ref: "#/$defs/N" } },
      $defs: { N: { type: "number" } },
    }, true],
    ["x", { type: "string", pattern: "^[0-9]+$" }, false],
    ["x", { not: { type: "string" } }, false],
  ];
  for (const [value, schema, wrong] of cases) {
    assert.equal(
      Boolean(mismatch(value, schema)),
      wrong,
      `${JSON.stringify(value)} against ${JSON.stringify(schema)}`,
    );
  }
  let deep: unknown = { type: "string" };
  for (let i = 0; i < 10_000; i++) deep = { type: "array", items: deep };
  let value: unknown = 5;
  for (let i = 0; i < 10_000; i++) value = [value];
  assert.equal(mismatch(value, deep), undefined, "too deep to tell: not judged");
});

Deno.test("findTool: the tool's own name wins, then the first allowed tool of an alias, per listing", () => {
  const tool = (name: string): Tool => ({ name, inputSchema: { type: "object" } });
  const listing = [tool("get-sum"), tool("get.sum"), tool("get_sum_x"), tool("get_sum")];
  assert.equal(findTool(listing, "get_sum")?.name, "get_sum");
  assert.equal(findTool(listing, "get-sum")?.name, "get-sum");
  const noHyphen = (t: Tool) => t.name !== "get-sum";
  assert.equal(findTool(listing.slice(0, 2), "get_sum", noHyphen)?.name, "get.sum");
  assert.equal(findTool(listing.slice(0, 2), "get_sum", () => false)?.name, "get-sum");
  assert.equal(findTool(listing, "get_sum_y"), undefined);
  // A new listing (the server's tools changed) is looked up afresh, not in the old one's aliases.
  assert.equal(findTool([tool("get-total")], "get_total")?.name, "get-total");
  assert.equal(findTool([tool("get-total")], "get_sum"), undefined);
});
