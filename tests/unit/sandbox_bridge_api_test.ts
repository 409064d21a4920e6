/**
 * The Python bridge's sandbox API, exactly: every value codemode's helpers return has the bridge's keys,
 * types and tuples (codemode may add keys), its names exist, its defaults hold, and every failed call is a
 * runtime.MCPError. The bridge's shapes below are read from its source (elusznik/mcp-server-code-execution-mode,
 * mcp_server_code_execution_mode.py: the sandbox entrypoint's helpers and MCPBridge's doc formatting).
 * Runs the runtime with the host's python3 against a fake host shaped like the real one.
 */
import assert from "node:assert/strict";
import { withPython } from "./_local_python.ts";
import { bridgeHost } from "./_bridge_host.ts";

/** A value's shape as the sandbox reports it: its Python type, a dict's keys, a sequence's first item. */
interface Shape {
  type: string;
  keys?: Record<string, Shape>;
  items?: Shape | null;
}

const SHAPE_OF = `
import json
def shape(value):
    if isinstance(value, (tuple, list)):
        return {"type": type(value).__name__, "items": shape(value[0]) if value else None}
    if isinstance(value, dict):
        return {"type": "dict", "keys": {str(k): shape(v) for k, v in value.items()}}
    return {"type": type(value).__name__}
`;

const str: Shape = { type: "str" };
const anyDict: Shape = { type: "dict", keys: {} };
const dict = (keys: Record<string, Shape>): Shape => ({ type: "dict", keys });
const tupleOf = (items: Shape): Shape => ({ type: "tuple", items });
const listOf = (items: Shape): Shape => ({ type: "list", items });

// The bridge's tool metadata (MCPBridge._ensure_server_metadata), server metadata, MCP tool dump
// (tool.model_dump(by_alias=True)) and tool doc (_format_tool_doc; description only when there is one).
const toolMeta = dict({ name: str, alias: str, description: str, input_schema: anyDict });
const serverMeta = dict({ name: str, alias: str, tools: listOf(toolMeta), cwd: { type: "str|NoneType" } });
const mcpTool = dict({ name: str, description: str, inputSchema: anyDict });
const doc = dict({ server: str, serverAlias: str, tool: str, toolAlias: str, description: str });
const fullDoc = dict({ ...doc.keys, inputSchema: anyDict });

const BRIDGE: Record<string, Shape> = {
  "discovered_servers()": tupleOf(str),
  "discovered_servers(detailed=True)": tupleOf(dict({ name: str, description: str })),
  "list_servers()": tupleOf(str),
  "list_servers_sync()": tupleOf(str),
  "describe_server(name)": serverMeta,
  "list_loaded_server_metadata()": tupleOf(serverMeta),
  "list_tools(server)": listOf(mcpTool),
  "list_tools_sync(server)": tupleOf(toolMeta),
  "query_tool_docs(server)": listOf(doc),
  "query_tool_docs(server, detail='full')": listOf(fullDoc),
  "query_tool_docs(server, tool=t)": doc,
  "query_tool_docs_sync(server)": listOf(doc),
  "query_tool_docs_sync(server, tool=t)": listOf(doc),
  "search_tool_docs(query)": listOf(doc),
  "search_tool_docs(query, detail='full')": listOf(fullDoc),
  "search_tool_docs_sync(query, limit=1)": listOf(doc),
  "capability_summary()": str,
};

const CALLS = `
from mcp import runtime
calls = {
    "discovered_servers()": runtime.discovered_servers(),
    "discovered_servers(detailed=True)": runtime.discovered_servers(detailed=True),
    "list_servers()": await runtime.list_servers(),
    "list_servers_sync()": runtime.list_servers_sync(),
    "describe_server(name)": runtime.describe_server("my-server"),
    "list_tools(server)": await runtime.list_tools("my-server"),
    "list_tools_sync(server)": runtime.list_tools_sync("my-server"),
    "list_loaded_server_metadata()": runtime.list_loaded_server_metadata(),
    "query_tool_docs(server)": await runtime.query_tool_docs("my-server"),
    "query_tool_docs(server, detail='full')": await runtime.query_tool_docs("my-server", detail="full"),
    "query_tool_docs(server, tool=t)": await runtime.query_tool_docs("my-server", tool="echo"),
    "query_tool_docs_sync(server)": runtime.query_tool_docs_sync("my-server"),
    "query_tool_docs_sync(server, tool=t)": runtime.query_tool_docs_sync("my_server", tool="echo"),
    "search_tool_docs(query)": await runtime.search_tool_docs("echo"),
    "search_tool_docs(query, detail='full')": await runtime.search_tool_docs("echo", detail="full"),
    "search_tool_docs_sync(query, limit=1)": runtime.search_tool_docs_sync("echo", limit=1),
    "capability_summary()": runtime.capability_summary(),
}
print(json.dumps({name: shape(value) for name, value in calls.items()}))
`;

/** Fails unless `actual` has every key `bridge` has, with the same types, at every depth. */
function assertSuperset(actual: Shape | null | undefined, bridge: Shape, path: string): void {
  assert.ok(actual, `${path}: missing (the bridge has a ${bridge.type})`);
  assert.ok(
    bridge.type.split("|").includes(actual.type),
    `${path}: ${actual.type}, the bridge's is ${bridge.type}`,
  );
  for (const [key, shape] of Object.entries(bridge.keys ?? {})) {
    assertSuperset(actual.keys?.[key], shape, `${path}["${key}"]`);
  }
  if (bridge.items) assertSuperset(actual.items, bridge.items, `${path}[0]`);
}

Deno.test("every runtime helper returns a superset of the bridge's shape: its keys, types and tuples", async () => {
  await withPython(async (python) => {
    const run = await python.execute(SHAPE_OF + CALLS, { answer: bridgeHost });
    assert.equal(run.done.status, "ok", run.done.error);
    const shapes = JSON.parse(run.stdout);
    for (const [call, bridge] of Object.entries(BRIDGE)) assertSuperset(shapes[call], bridge, call);
  });
});

Deno.test("the shape check fails for a tuple where the bridge has a list, and for a missing key", () => {
  assert.throws(() => assertSuperset(tupleOf(str), listOf(str), "x"), /x: tuple, the bridge's is list/);
  assert.throws(() => assertSuperset(dict({ tool: str }), doc, "x"), /x\["server"\]: missing/);
});

Deno.test("the runtime has the bridge's names, and its _sync variants its defaults", async () => {
  await withPython(async (python) => {
    const run = await python.execute(`
import inspect, json
from mcp import runtime
import mcp
def defaults(function):
    return {p.name: repr(p.default) for p in inspect.signature(function).parameters.values()
            if p.default is not p.empty}
print(json.dumps({
    "all": runtime.__all__,
    "mcp_all": mcp.__all__,
    "defaults": {name: defaults(getattr(runtime, name)) for name in (
        "list_tools_sync", "query_tool_docs", "query_tool_docs_sync", "search_tool_docs",
        "search_tool_docs_sync", "discovered_servers", "call_tool")},
}))`);
    const facts = JSON.parse(run.stdout);
    for (
      const name of [
        "MCPError",
        "call_tool",
        "list_tools",
        "list_tools_sync",
        "list_servers",
        "list_servers_sync",
        "discovered_servers",
        "describe_server",
        "list_loaded_server_metadata",
        "query_tool_docs_sync",
        "query_tool_docs",
        "search_tool_docs_sync",
        "search_tool_docs",
        "capability_summary",
      ]
    ) assert.ok(facts.all.includes(name), `runtime.__all__ lacks ${name}`);
    assert.ok(facts.mcp_all.includes("runtime") && facts.mcp_all.includes("servers"));
    // The bridge's defaults, parameter by parameter (codemode's may add keyword-only ones, e.g. raw).
    const bridge: Record<string, Record<string, string>> = {
      list_tools_sync: { server: "None" },
      query_tool_docs: { tool: "None", detail: "'summary'" },
      query_tool_docs_sync: { tool: "None", detail: "'summary'" },
      search_tool_docs: { limit: "5", detail: "'summary'" },
      search_tool_docs_sync: { limit: "5", detail: "'summary'" },
      discovered_servers: { detailed: "False" },
      call_tool: { arguments: "None" },
    };
    for (const [name, expected] of Object.entries(bridge)) {
      for (const [param, value] of Object.entries(expected)) {
        assert.equal(facts.defaults[name][param], value, `${name}(${param}=...)`);
      }
    }
  });
});

Deno.test("every error a call into the host raises is a runtime.MCPError, and still its own type", async () => {
  const kinds = [
    "ToolError",
    "PermissionError",
    "KeyError",
    "AttributeError",
    "ValueError",
    "TypeError",
    "TimeoutError",
    "NotImplementedError",
    "RuntimeError",
    "ServerGone",
  ];
  await withPython(async (python) => {
    const run = await python.execute(
      `
import builtins
from mcp import runtime, MCPError, ToolError
seen = {"ToolError is an MCPError": issubclass(ToolError, runtime.MCPError),
        "MCPError is a RuntimeError": issubclass(MCPError, RuntimeError),
        "one MCPError": runtime.MCPError is MCPError}
for kind in ${JSON.stringify(kinds)}:
    try:
        await mcp_my_server.echo(message=kind)
    except MCPError as error:
        expected = ToolError if kind == "ToolError" else getattr(builtins, kind, MCPError)
        seen[kind] = isinstance(error, expected) and type(error).__name__
async def caught(call):
    try:
        await call()
    except MCPError as error:
        return type(error).__name__ if isinstance(error, (TypeError, ValueError)) else "not its type"
seen["positional arguments"] = await caught(lambda: mcp_my_server.echo("x"))
seen["a call over the frame cap"] = await caught(lambda: mcp_my_server.echo(message="x" * 17_000_000))
try:
    runtime.list_tools_sync()
except MCPError as error:
    seen["list_tools_sync() without a server"] = isinstance(error, TypeError)
seen`,
      {
        answer: (rpc) => ({
          error: {
            type: String(rpc.params.arguments && (rpc.params.arguments as { message: string }).message),
            message: "no",
          },
        }),
      },
    );
    assert.equal(run.done.status, "ok", run.done.error);
    const expected = [
      "'ToolError is an MCPError': True",
      "'MCPError is a RuntimeError': True",
      "'one MCPError': True",
      ...kinds.map((kind) =>
        `'${kind}': '${kind === "RuntimeError" || kind === "ServerGone" ? "MCPError" : kind}'`
      ),
      "'positional arguments': 'TypeError'",
      "'a call over the frame cap': 'ValueError'",
      "'list_tools_sync() without a server': True",
    ];
    assert.equal(run.done.value, `{${expected.join(", ")}}`);
  });
});

Deno.test("asyncio, mcp and LOADED_MCP_SERVERS need no import, as in the bridge's sandbox", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "r = await asyncio.gather(mcp_my_server.echo(message='a'), mcp_my_server.echo(message='b'))\n" +
        "([x['arguments']['message'] for x in r], mcp.runtime.discovered_servers(), LOADED_MCP_SERVERS)",
      { answer: bridgeHost },
    );
    assert.equal(run.done.value, "(['a', 'b'], ('my-server',), ('my-server',))");
  });
});

Deno.test("mcp.servers lists its modules in __all__; each has TOOLS and TOOL_MAP; proxies have list_tools()", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "import mcp.servers, mcp.servers.my_server as m\n" +
        "listed = await mcp_my_server.list_tools()\n" +
        "(mcp.servers.__all__, m.__all__, [t['alias'] for t in m.TOOLS], sorted(m.TOOL_MAP), " +
        "[t['name'] for t in listed], type(listed).__name__)",
      { answer: bridgeHost },
    );
    assert.equal(
      run.done.value,
      "(['my_server'], ['echo', 'get_file'], ['echo', 'get_file'], ['echo', 'get_file'], ['echo', 'get-file'], 'list')",
    );
    // A server's own tool named list_tools still wins over the helper.
    const own = await python.execute("await mcp_my_server.list_tools()", {
      answer: (rpc) =>
        rpc.method === "list_tools"
          ? { value: [{ server: "my-server", tool: "list_tools", alias: "list_tools", description: "" }] }
          : bridgeHost(rpc),
    });
    assert.equal(own.done.value, "{'called': 'list_tools', 'arguments': {}}");
  });
});
