/**
 * The drift check: a skill's tool calls against the servers and tools a catalog knows, and the `ast`
 * pass in the sandbox runtime that finds those calls (run with the host's python3).
 */
import assert from "node:assert/strict";
import { checkCalls, type SkillCall } from "../../core/skills/check.ts";
import type { ToolDoc } from "../../core/catalog/docs.ts";
import { Policy } from "../../core/config/policy.ts";
import { withMcpModules } from "./_mcp_modules.ts";

const TOOLS: Record<string, ToolDoc[]> = {
  everything: [
    {
      server: "everything",
      tool: "echo",
      inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
    },
    {
      server: "everything",
      tool: "get-sum",
      inputSchema: { type: "object", properties: { a: {}, b: {} }, required: ["a", "b"] },
    },
    { server: "everything", tool: "open", inputSchema: { type: "object", additionalProperties: true } },
  ],
  "my-memory": [{ server: "my-memory", tool: "read_graph", inputSchema: { type: "object", properties: {} } }],
};

const context = (policy?: Policy) => ({
  servers: ["everything", "my-memory", "down"],
  tools: (server: string) => Promise.resolve(TOOLS[server]),
  policy,
});

Deno.test("checkCalls() finds unknown servers, tools and arguments, and missing required ones", async () => {
  const calls: SkillCall[] = [
    { line: 1, server: "everything", tool: "echo", keywords: ["message"], via: "proxy" },
    { line: 2, server: "everything", tool: "no_such_tool", keywords: [], via: "proxy" },
    { line: 3, server: "everything", tool: "echo", keywords: ["message", "bogus", "raw"], via: "proxy" },
    { line: 4, server: "nowhere", tool: "thing", keywords: [], via: "proxy" },
    { line: 5, server: "everything", tool: "get_sum", keywords: ["a"], via: "proxy" },
    { line: 6, server: "everything", tool: "get-sum", keywords: ["a", "b"], via: "call_tool" },
    { line: 7, server: "my_memory", tool: "read_graph", keywords: [], via: "proxy" },
    { line: 8, server: "my-memory", tool: "read_graph", keywords: [], via: "servers" },
    { line: 9, server: "everything", tool: "echo", keywords: [], dynamic: true, via: "proxy" },
    { line: 10, server: "everything", tool: "open", keywords: ["anything"], via: "proxy" },
    { line: 11, server: "everything", tool: "echo", keywords: ["message"], positional: 1, via: "proxy" },
    { line: 12, server: "down", tool: "x", keywords: [], via: "proxy" },
  ];
  const { findings, unchecked } = await checkCalls("demo", "demo/skill.py", calls, context());
  assert.deepEqual(findings.map((f) => [f.line, f.kind]), [
    [2, "unknown-tool"],
    [3, "unknown-argument"],
    [4, "unknown-server"],
    [5, "missing-argument"],
    [11, "positional"],
  ]);
  assert.match(
    findings[0].message,
    /mcp_everything\.no_such_tool\(\.\.\.\): server "everything" has no tool "no_such_tool" \(it has: echo, get_sum, open\)/,
  );
  assert.match(findings[1].message, /"echo" takes no argument "bogus" \(it takes: message\)/);
  assert.match(
    findings[2].message,
    /no MCP server "nowhere" is configured \(configured: everything, my_memory, down\)/,
  );
  assert.match(findings[3].message, /"get-sum" needs the argument "b"/);
  assert.ok(findings.every((f) => f.file === "demo/skill.py" && f.skill === "demo"));
  assert.deepEqual(unchecked, ["down"]);
});

Deno.test("checkCalls() reports calls the policy refuses", async () => {
  const policy = new Policy({
    allowServers: ["*"],
    denyServers: ["secret-*"],
    allowTools: ["*"],
    denyTools: ["everything/get-sum"],
    readOnly: false,
  });
  const calls: SkillCall[] = [
    { line: 1, server: "secret-vault", tool: "open", keywords: [], via: "proxy" },
    { line: 2, server: "everything", tool: "get_sum", keywords: ["a", "b"], via: "proxy" },
  ];
  const { findings } = await checkCalls("p", "p/skill.py", calls, context(policy));
  assert.deepEqual(findings.map((f) => [f.line, f.kind]), [[1, "refused"], [2, "refused"]]);
  assert.match(findings[1].message, /CODEMODE_DENY_TOOLS/);
});

/** Runs the sandbox's `ast` pass on `code` with the host's python3. */
function analyse(code: string): { functions: Record<string, unknown>[]; calls: SkillCall[]; error: unknown } {
  const program = "import json\nfrom mcp import _skill_code\nprint(json.dumps(_skill_code.analyse(INPUT)))";
  return withMcpModules(
    ["mcp._literals", "mcp._certainty", "mcp._calls", "mcp._skill_code"],
    program,
    code,
  ) as ReturnType<typeof analyse>;
}

Deno.test("the sandbox's ast pass finds every literal tool call form with its keywords and line", () => {
  const { calls, error } = analyse(`
from mcp import runtime
from mcp.servers.everything import get_structured_content as weather
async def go(args):
    await mcp_everything.echo(message="a", raw=True)
    await mcp_servers["my-memory"].read_graph()
    await runtime.call_tool("everything", "get-sum", {"a": 1, "b": 2})
    await call_tool(server="everything", tool="echo", arguments=dict(message="x"))
    await weather(location="Oslo")
    await mcp_everything.echo(**args)
    await mcp_everything.echo("positional")
    await runtime.call_tool("everything", name_in_a_variable, {})
    await runtime.call_tool("everything", "echo", args)
    mcp_everything._tools()
`);
  assert.equal(error, null);
  assert.deepEqual(
    calls.map((c) => [c.line, c.via, c.server, c.tool, c.keywords, Boolean(c.dynamic), c.positional ?? 0]),
    [
      [5, "proxy", "everything", "echo", ["message", "raw"], false, 0],
      [6, "servers", "my-memory", "read_graph", [], false, 0],
      [7, "call_tool", "everything", "get-sum", ["a", "b"], false, 0],
      [8, "call_tool", "everything", "echo", ["message"], false, 0],
      [9, "import", "everything", "get_structured_content", ["location"], false, 0],
      [10, "proxy", "everything", "echo", [], true, 0],
      [11, "proxy", "everything", "echo", [], false, 1],
      [13, "call_tool", "everything", "echo", [], true, 0],
    ],
  );
});

Deno.test("the sandbox's ast pass lists public functions and classes, and reports a syntax error's line", () => {
  const { functions } = analyse(`
async def count(path: str, *, limit: int = 10) -> int:
    """Counts TODO lines.

    More detail."""
def _private(): pass
class Tally:
    """Keeps a tally."""
    def __init__(self, start=0): pass
`);
  assert.deepEqual(functions.map((f) => [f.name, f.kind, f.signature, f.doc, f.async]), [
    ["count", "function", "(path: str, *, limit: int=10) -> int", "Counts TODO lines.", true],
    ["Tally", "class", "(start=0)", "Keeps a tally.", undefined],
  ]);
  assert.deepEqual(analyse("x = 1\ndef f(:\n").error, { line: 2, message: "SyntaxError: invalid syntax" });
  assert.deepEqual(analyse("__all__ = ['b']\ndef a(): pass\ndef b(): pass\n").functions.map((f) => f.name), [
    "b",
  ]);
});
