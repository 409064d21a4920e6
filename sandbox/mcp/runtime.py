"""Discovery and call helpers: `from mcp import runtime`.

The async helpers are coroutines (await them, top-level await works); each has a `_sync` twin where the
Python bridge had one. Servers may be given by name or by alias.
"""
from codemode_runtime import context

from . import _dry_run, _proxy

_DETAILS = ("summary", "full")


def _rpc():
    return context.current().rpc


def _servers():
    return context.current().config["servers"]


def discovered_servers(detailed=False):
    """Names of every configured server (no RPC); with detailed=True, dicts with name, alias, description."""
    if not detailed:
        return tuple(server["name"] for server in _servers())
    return tuple(_public(server) for server in _servers())


async def list_servers():
    """The servers the host can reach, as the host reports them."""
    return await _rpc().call("list_servers", {})


def list_servers_sync():
    """Blocking list_servers()."""
    return _rpc().call_sync("list_servers", {})


def describe_server(name):
    """The host's description of one server (blocking)."""
    return _rpc().call_sync("describe_server", {"name": _proxy.server_name(name)})


async def list_tools(server):
    """The tools of one server (starts it if needed)."""
    name = _proxy.server_name(server)
    return _remember(name, await _rpc().call("list_tools", {"server": name}))


def list_tools_sync(server):
    """Blocking list_tools()."""
    name = _proxy.server_name(server)
    return _remember(name, _rpc().call_sync("list_tools", {"server": name}))


async def query_tool_docs(server, tool=None, detail="summary"):
    """Docs for every tool of a server, or one tool; detail="full" includes input schemas."""
    return await _rpc().call("query_tool_docs", _docs_params(server, tool, detail))


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Blocking query_tool_docs()."""
    return _rpc().call_sync("query_tool_docs", _docs_params(server, tool, detail))


async def search_tool_docs(query, limit=5):
    """Fuzzy search over the tool docs of every configured server, loaded or not; best match first."""
    return await _rpc().call("search_tool_docs", {"query": str(query), "limit": int(limit)})


def search_tool_docs_sync(query, limit=5):
    """Blocking search_tool_docs()."""
    return _rpc().call_sync("search_tool_docs", {"query": str(query), "limit": int(limit)})


async def call_tool(server, tool, arguments=None, *, raw=False):
    """Calls a tool by server and tool name (aliases work too); raw=True returns the whole MCP result."""
    proxy = _proxy.proxy_for(server)
    name = await proxy._tool_name(tool) if proxy is not None else tool
    return await _proxy.call_tool(server, name, arguments, raw)


def dry_run():
    """A block whose tool calls are planned, not made: `async with runtime.dry_run():` (or `with`).

    Inside it, tools their server annotates `readOnlyHint: true` run as usual; every other call returns
    None without being made, and the result's `planned_calls` lists it (server, tool, arguments). Run the
    same code outside the block to make the calls for real.
    """
    return _dry_run.DryRun()


def list_loaded_server_metadata():
    """What this sandbox knows locally about each configured server, including tools listed so far."""
    metadata = []
    for server in _servers():
        entry = _public(server)
        tools = _proxy.proxy_for(server["name"])._ServerProxy__state.tools
        if tools is not None:
            entry["tools"] = tools
        metadata.append(entry)
    return tuple(metadata)


def capability_summary():
    """One paragraph on what this sandbox offers and how to use it."""
    names = [server["name"] for server in _servers()]
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    servers = f"{len(names)} MCP server(s) are configured ({shown})" if names else "No MCP server is set up"
    return (
        "This is a Python sandbox with no network access; /tmp and /workspace are writable, and globals, "
        "imports and the asyncio event loop persist between runs. Top-level await works and the value of "
        f"a final expression is returned. {servers}: each is a global mcp_<alias> (also "
        "mcp_servers[name]) whose tools you call as `await mcp_<alias>.<tool>(**kwargs)`, or import with "
        "`from mcp.servers.<alias> import <tool>`. Discover before calling: `from mcp import runtime`, then "
        "runtime.discovered_servers(), await runtime.search_tool_docs(query, limit=5), await "
        "runtime.query_tool_docs(server, tool=None, detail='summary'|'full'), dir(mcp_<alias>) and "
        "help(mcp_<alias>.<tool>). A failing tool raises ToolError; raw=True returns the whole MCP result. "
        "`async with runtime.dry_run():` plans calls instead of making them (read-only tools still run); "
        "a call the user must approve waits for them, and a refusal raises PermissionError."
    )


def _public(server):
    return {key: server[key] for key in ("name", "alias", "description") if server.get(key)}


def _docs_params(server, tool, detail):
    if detail not in _DETAILS:
        raise ValueError(f"Unknown detail {detail!r}: use 'summary' or 'full'")
    params = {"server": _proxy.server_name(server), "detail": detail}
    if tool is not None:
        params["tool"] = tool
    return params


def _remember(name, value):
    proxy = _proxy.proxy_for(name)
    if proxy is not None:
        proxy._ServerProxy__state.remember(value)
    return value
