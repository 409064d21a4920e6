/**
 * The Python bridge's sandbox API against a real `codemode serve` and real MCP servers from npm: README's
 * first example runs as written (asyncio without an import), and the discovery helpers answer in the
 * bridge's shapes with what the real host knows. The shapes themselves are pinned key by key in
 * tests/unit/sandbox_bridge_api_test.ts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podman } from "../../plugins/runtime/podman.ts";
import { fakeHome, ROOT, runWithin, serve, type Served, serveTest } from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED bridge API suite: podman or image ${TEST_IMAGE} missing`);

const files = mkdtempSync(join(tmpdir(), "codemode-bridge-"));
const notes = join(files, "notes.md");
const plans = join(files, "plans.md");
writeFileSync(notes, "# notes\nTODO: water the plants\nsome text\n");
writeFileSync(plans, "# plans\nTODO: call the bank\n");
const home = fakeHome({
  filesystem: {
    command: "node",
    args: [join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), files],
  },
});

let served: Served | undefined;
const test = serveTest(usable, async () => served ??= await serve({ CODEMODE_RUNTIME: "podman" }, home));

/** README's first code block, with its file paths pointed at this test's files (nothing else changed). */
function readmeExample(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const code = /```python\n([\s\S]*?)```/.exec(readme)![1];
  assert.match(code, /asyncio\.gather/);
  assert.doesNotMatch(code, /import asyncio/, "the example relies on asyncio needing no import");
  assert.match(code, /"\/tmp\/notes\.md", "\/tmp\/plans\.md"/);
  return code.replace('"/tmp/notes.md"', JSON.stringify(notes)).replace(
    '"/tmp/plans.md"',
    JSON.stringify(plans),
  );
}

test("README's first example runs as written: search, a file read and parallel calls without importing asyncio", async (s) => {
  const r = await runWithin(s, readmeExample(), 60, 180_000);
  assert.equal(r.isError, false, r.text);
  assert.equal(r.structured.value, "2");
  const graph = await runWithin(
    s,
    "sorted(e['name'] for e in (await mcp_memory.read_graph())['entities'])",
    60,
    120_000,
  );
  assert.equal(graph.structured.value, "['TODO: call the bank', 'TODO: water the plants']");
});

test("the discovery helpers answer in the bridge's shapes with what the host knows", async (s) => {
  const r = await runWithin(
    s,
    `
import json
from mcp import runtime, MCPError
one = await runtime.query_tool_docs("everything", tool="get_sum")
listed = runtime.query_tool_docs_sync("everything", tool="get-sum")
hits = await runtime.search_tool_docs("sum of two numbers", limit=1, detail="full")
try:
    await mcp_everything.no_such_tool()
except MCPError as error:
    missing = [type(error).__name__, isinstance(error, AttributeError)]
print(json.dumps({
    "list_servers": sorted(await runtime.list_servers()),
    "list_servers type": type(await runtime.list_servers()).__name__,
    "detailed": sorted(runtime.discovered_servers(detailed=True), key=lambda s: s["name"])[0],
    "one": {k: one[k] for k in ("server", "serverAlias", "tool", "toolAlias")},
    "listed": [type(listed).__name__, len(listed)],
    "hit": {k: hits[0][k] for k in ("server", "serverAlias", "tool", "toolAlias")},
    "hit schema": sorted(hits[0]["inputSchema"]["properties"]),
    "memory tools": "read_graph" in [t["name"] for t in await runtime.list_tools("memory")],
    "all": sorted(__import__("mcp.servers").servers.__all__),
    "missing tool": missing,
}))`,
    60,
    180_000,
  );
  assert.equal(r.isError, false, r.text);
  assert.deepEqual(JSON.parse(String(r.structured.stdout)), {
    "list_servers": ["everything", "filesystem", "memory"],
    "list_servers type": "tuple",
    "detailed": { name: "everything", description: "", alias: "everything" },
    "one": { server: "everything", serverAlias: "everything", tool: "get-sum", toolAlias: "get_sum" },
    "listed": ["list", 1],
    "hit": { server: "everything", serverAlias: "everything", tool: "get-sum", toolAlias: "get_sum" },
    "hit schema": ["a", "b"],
    "memory tools": true,
    "all": ["everything", "filesystem", "memory"],
    "missing tool": ["AttributeError", true],
  });
});

test("closing the client ends the serve", async (s) => {
  await s.close();
  served = undefined;
});
