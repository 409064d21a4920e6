"""Discovery and call helpers: `from mcp import runtime`.

The async helpers are coroutines (await them, top-level await works); each has a `_sync` twin where the
Python bridge had one. Servers may be given by name or by alias.
"""
from codemode_runtime import context

from . import _proxy, _skills

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


async def search_tool_docs(query, limit=5, detail="summary"):
    """Fuzzy search over the tool docs of every configured server, loaded or not, and the skills (server
    "skills"); best match first. detail="full" adds signatures: each tool's, and a skill's functions."""
    hits = await _rpc().call("search_tool_docs", _search_params(query, limit, detail))
    return await _skills.add_functions(hits) if detail == "full" else hits


def search_tool_docs_sync(query, limit=5, detail="summary"):
    """Blocking search_tool_docs()."""
    hits = _rpc().call_sync("search_tool_docs", _search_params(query, limit, detail))
    return _skills.add_functions_sync(hits) if detail == "full" else hits


async def call_tool(server, tool, arguments=None, *, raw=False):
    """Calls a tool by server and tool name (aliases work too); raw=True returns the whole MCP result."""
    proxy = _proxy.proxy_for(server)
    name = await proxy._tool_name(tool) if proxy is not None else tool
    return await _proxy.call_tool(server, name, arguments, raw)


async def save_skill(name, code, description, *, overwrite=False):
    """Saves code for later sessions as the skill `name` (lowercase words joined by "-" or "_"): `code` is
    a string, or a function or class defined in an earlier cell. Later: `from skills import <name>`.
    overwrite=True replaces a skill of that name. Returns the skill's name and module."""
    return await _rpc().call("save_skill", _skills.save_params(name, code, description, overwrite))


def save_skill_sync(name, code, description, *, overwrite=False):
    """Blocking save_skill()."""
    return _rpc().call_sync("save_skill", _skills.save_params(name, code, description, overwrite))


async def list_skills():
    """Every skill: name, module (`from skills import <module>`), description and public functions; skills
    that upstream servers publish are named "<server>/<name>" (read them with read_skill)."""
    return await _skills.with_functions(await _rpc().call("list_skills", {}))


def list_skills_sync():
    """Blocking list_skills()."""
    return _skills.with_functions_sync(_rpc().call_sync("list_skills", {}))


async def read_skill(name):
    """A skill's SKILL.md text (`skill_md`) and code (`code`, None for a documentation skill); name it as
    saved ("todo-counter" or "todo_counter"), or "<server>/<name>" for a skill an upstream server publishes."""
    return await _rpc().call("read_skill", {"name": str(name)})


def read_skill_sync(name):
    """Blocking read_skill()."""
    return _rpc().call_sync("read_skill", {"name": str(name)})


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
        "help(mcp_<alias>.<tool>). A failing tool raises ToolError; raw=True returns the whole MCP result."
        + _skills_summary()
    )


def _skills_summary():
    """The skills part of capability_summary(): how to use them and which exist, capped to stay short."""
    try:
        skills = _rpc().call_sync("list_skills", {})
    except Exception:
        return ""  # skills are off, or the host can't say
    text = (" Skills are saved code and know-how: `from skills import <name>`, then await <name>.<function>(...); "
            "await runtime.list_skills(), await runtime.read_skill(name), and "
            "await runtime.save_skill(name, code_or_function, description) to keep working code for later.")
    if not skills:
        return text + " No skill is saved yet."
    shown = []
    for skill in skills[:15]:
        description = " ".join(str(skill.get("description") or "").split())
        shown.append(f"{skill.get('module') or skill['name']} ({description[:80]})")
    more = f", and {len(skills) - 15} more" if len(skills) > 15 else ""
    return text + f" Saved skills: {'; '.join(shown)}{more}."


def _search_params(query, limit, detail):
    if detail not in _DETAILS:
        raise ValueError(f"Unknown detail {detail!r}: use 'summary' or 'full'")
    return {"query": str(query), "limit": int(limit), "detail": detail}


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
