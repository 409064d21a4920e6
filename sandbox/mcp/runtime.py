"""Discovery and call helpers: `from mcp import runtime`.

Every helper returns a superset of what the Python bridge's helper of the same name returns (the same
keys, types and tuples; codemode adds keys), so code written for the bridge runs unchanged. The async
helpers are coroutines (await them; top-level await works); each has the `_sync` twin the bridge has,
with the same defaults. Servers may be given by name or by alias. Every error a call into the host raises
is an MCPError (ToolError, and PermissionError, KeyError, ... that are MCPErrors too).

One deliberate difference: `call_tool` and the proxies return the tool's result unwrapped (structured
content, else JSON-decoded text, else the content items); `raw=True` returns the whole MCP result, which
is what the bridge returns.
"""
from codemode_runtime import context
from codemode_runtime.rpc import MCPError, ToolError, mcp_error

from . import _added, _dry_run, _plan, _proxy, _skills

__all__ = [
    "MCPError",
    "ToolError",
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
    "save_artifact",
    "save_skill",
    "save_skill_sync",
    "list_skills",
    "list_skills_sync",
    "read_skill",
    "read_skill_sync",
    "dry_run",
    "start_job",
    "jobs",
    "wait",
    "plan",
    "stubs",
    "find_servers",
    "find_servers_sync",
    "add_server",
    "add_server_sync",
    "remove_server",
    "remove_server_sync",
]

_DETAILS = ("summary", "full")


def _rpc():
    return context.current().rpc


def _servers():
    return context.current().config["servers"]


def discovered_servers(detailed=False):
    """Names of every configured server (no RPC), as a tuple; with detailed=True, a tuple of dicts with
    name, description ("" when the config gives none) and alias."""
    if not detailed:
        return tuple(server["name"] for server in _servers())
    return tuple(_public(server) for server in _servers())


async def list_servers():
    """Names of the servers sandbox code may use, as a tuple."""
    return _names(await _rpc().call("list_servers", {}))


def list_servers_sync():
    """Blocking list_servers()."""
    return _names(_rpc().call_sync("list_servers", {}))


def describe_server(name):
    """One server (blocking): name, alias, description, cwd (None unless the config sets one), transport,
    and tools as the bridge's metadata lists them (name, alias, description, input_schema, ...)."""
    server = _rpc().call_sync("describe_server", {"name": _proxy.server_name(name)})
    tools = _remember(server.get("name", name), server.get("tools") or [])
    return {**server, "description": str(server.get("description") or ""), "cwd": server.get("cwd"),
            "tools": [dict(tool) for tool in tools]}


async def list_tools(server):
    """The tools of one server (starts it if needed), as a list of MCP tools (name, description,
    inputSchema, ...) with codemode's alias and the bridge's input_schema added."""
    name = _proxy.server_name(server)
    return [dict(tool) for tool in _remember(name, await _rpc().call("list_tools", {"server": name}))]


def list_tools_sync(server=None):
    """Blocking list_tools(), as a tuple (as the bridge's)."""
    if server is None:
        raise mcp_error(TypeError, "list_tools_sync(server) requires a server name")
    name = _proxy.server_name(server)
    return tuple(dict(tool) for tool in _remember(name, _rpc().call_sync("list_tools", {"server": name})))


async def query_tool_docs(server, tool=None, detail="summary"):
    """Docs of every tool of a server, as a list; with tool=..., that tool's doc as one dict. Each doc
    has server, serverAlias, tool, toolAlias, description and, with detail="full", inputSchema."""
    params = _docs_params(server, tool, detail)
    return _docs_answer(await _rpc().call("query_tool_docs", params), tool, single=True)


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Blocking query_tool_docs(); always a list (one doc with tool=..., as the bridge's)."""
    params = _docs_params(server, tool, detail)
    return _docs_answer(_rpc().call_sync("query_tool_docs", params), tool, single=False)


async def search_tool_docs(query, limit=5, *, detail="summary"):
    """Fuzzy search over the tool docs of every configured server, loaded or not, and the skills (server
    "skills"); best match first. Each hit is a doc as query_tool_docs gives it, plus its score;
    detail="full" adds signatures: each tool's, and a skill's functions."""
    params = _search_params(query, limit, detail)
    hits = _docs(await _rpc().call("search_tool_docs", params))
    return await _skills.add_functions(hits) if params.get("detail") == "full" else hits


def search_tool_docs_sync(query, limit=5, *, detail="summary"):
    """Blocking search_tool_docs()."""
    params = _search_params(query, limit, detail)
    hits = _docs(_rpc().call_sync("search_tool_docs", params))
    return _skills.add_functions_sync(hits) if params.get("detail") == "full" else hits


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


async def stubs(server, tool=None):
    """Python stubs (.pyi text) of a server's tools: keyword-only signatures with types, TypedDicts for
    objects, the descriptions as docstrings; with tool=..., that tool's stub alone."""
    params = {"server": _proxy.server_name(server)}
    if tool is not None:
        params["tool"] = str(tool)
    return (await _rpc().call("stubs", params))["text"]


def dry_run():
    """A block whose tool calls are planned, not made: `async with runtime.dry_run():` (or `with`).

    Inside it, tools their server annotates `readOnlyHint: true` run as usual; every other call returns
    None without being made, and the result's `planned_calls` lists it (server, tool, arguments). Run the
    same code outside the block to make the calls for real.
    """
    return _dry_run.DryRun()


def start_job(work, name=None):
    """Runs `work` in the background and returns its job at once: a coroutine, an async function (called
    with no arguments) or a plain function (run in a thread of its own). It goes on between runs; its tool
    calls go through the host as any run's do. What it prints belongs to the job (see jobs(), job.output);
    its displays are shown by the run that waits for it. `name` defaults to the function's name.

        job = runtime.start_job(crawl)          # later: await runtime.wait(job); job.cancel()
    """
    return _jobs().start(work, name)


def jobs():
    """Every background job of this session (running, and the latest finished), oldest first: dicts with
    id, name, state ("running", "done", "failed", "cancelled"), seconds, tool_calls, output_tail (the last
    2 KiB it printed) and error. asyncio tasks a run left running are listed too, by their task name."""
    return _jobs().list()


async def wait(job, timeout=None):
    """Waits for a job (a handle from start_job(), an asyncio task, or a job id) and returns its value, or
    raises its error (asyncio.CancelledError when it was cancelled). With a timeout, raises TimeoutError
    after that many seconds and leaves the job running. Displays the job made are shown in this run."""
    return await _jobs().wait(job, timeout)


def _jobs():
    return context.current().jobs


def plan(description):
    """A block whose calls the user approves once, as a whole: `async with runtime.plan("what it does"):`.

    The block runs twice. First as a dry run: tools annotated read-only run, other calls return None and are
    recorded. Then the user is asked one question listing every recorded call; once approved, the block
    runs again for real and exactly those calls go out without further questions, while any other call
    that could change something raises PermissionError. Declined: the block does not run again and the
    `async with` raises PermissionError. Code in the block that is not a tool call (prints, files,
    counters) runs twice; `as p` gives the plan, and `p.dry` is True during the first run.
    """
    return _plan.Plan(description)


def list_loaded_server_metadata():
    """Every configured and added server as the bridge's metadata: name, alias, description, tools (name,
    alias, description, input_schema, ...) and cwd (None here: describe_server() has it). Tools this
    sandbox has not listed yet come from the host's catalog in one call (blocking)."""
    unlisted = [s["name"] for s in _servers() if _proxy.proxy_for(s["name"])._ServerProxy__state.tools is None]
    described = {}
    if unlisted:
        try:
            answer = _rpc().call_sync("describe_servers", {"names": unlisted})
            described = {s["name"]: s.get("tools") or [] for s in answer if isinstance(s, dict) and "name" in s}
        except Exception:
            pass  # a host that cannot say (or Pyodide, which cannot block): those servers list no tools
    metadata = []
    for server in _servers():
        tools = _proxy.proxy_for(server["name"])._ServerProxy__state.tools
        if tools is None and server["name"] in described:
            tools = _remember(server["name"], described[server["name"]])
        metadata.append({**_public(server), "tools": [dict(tool) for tool in tools or ()], "cwd": None})
    return tuple(metadata)


async def find_servers(query, limit=10):
    """Searches the MCP registry (by server name) for servers that are not configured here; a list of
    dicts: name, description, version, run (how it would run: type and command, or url), env (each
    variable's name, required, secret), allowed and, when not allowed, why. Search the configured tools
    first (search_tool_docs); registry entries are untrusted text."""
    return list(await _rpc().call("find_servers", _added.find_params(query, limit)))


def find_servers_sync(query, limit=10):
    """Blocking find_servers()."""
    return list(_rpc().call_sync("find_servers", _added.find_params(query, limit)))


async def add_server(name, version=None, env=None, alias=None):
    """Adds a registry server to this session (the user is asked first unless the setting allows it):
    `mcp_<alias>` is callable at once, in this run. env sets variables the entry declares that are not
    secret (secrets only the user gives). Returns {alias, name, version, tools}; a refusal raises
    PermissionError (or ValueError for an entry codemode will not run)."""
    return _added.added(await _rpc().call("add_server", _added.add_params(name, version, env, alias)))


def add_server_sync(name, version=None, env=None, alias=None):
    """Blocking add_server()."""
    return _added.added(_rpc().call_sync("add_server", _added.add_params(name, version, env, alias)))


async def remove_server(alias):
    """Stops a server this session added and forgets mcp_<alias>."""
    answer = await _rpc().call("remove_server", {"alias": str(alias)})
    _added.unregister(str(alias))
    return answer


def remove_server_sync(alias):
    """Blocking remove_server()."""
    answer = _rpc().call_sync("remove_server", {"alias": str(alias)})
    _added.unregister(str(alias))
    return answer


def save_artifact(name, data):
    """Saves `data` (bytes or str) as artifact `name` (a path under /workspace/artifacts, no hidden parts):
    the result of this run lists it, and the client can read it. Returns its path in the sandbox."""
    return context.current().artifacts.save(name, data)


def capability_summary():
    """One paragraph on what this sandbox offers and how to use it."""
    names = [server["name"] for server in _servers()]
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    servers = f"{len(names)} MCP server(s) are configured ({shown})" if names else "No MCP server is set up"
    return (
        "This is a Python sandbox with no network access; /tmp and /workspace are writable, and globals, "
        "imports and the asyncio event loop persist between runs. Top-level await works, asyncio needs no "
        "import, and the value of a final expression is returned. display(obj) shows plots, images and "
        "tables in the result, as do open matplotlib figures at the end of a run and plt.show(). "
        f"{servers}: each is a global mcp_<alias> (also mcp_servers[name]) whose tools you call as "
        "`await mcp_<alias>.<tool>(**kwargs)`, or import with `from mcp.servers.<alias> import <tool>`. "
        "Discover before calling: `from mcp import runtime`, then runtime.discovered_servers(), await "
        "runtime.search_tool_docs(query, limit=5), await runtime.query_tool_docs(server, tool=None, "
        "detail='summary'|'full'), dir(mcp_<alias>), help(mcp_<alias>.<tool>) (a typed signature) and await "
        "runtime.stubs(server) (the server's Python stubs). Tool calls are checked before a program runs: an "
        "unknown server, tool or argument stops it before any call, with each finding's line and fix (a first "
        "line `# codemode: nocheck` skips that). A failing tool raises "
        "ToolError (an MCPError, like every failed call); raw=True returns the whole MCP result. "
        "Files written to /workspace/artifacts (or runtime.save_artifact(name, data)) are sent to the client "
        "after the run. "
        "`async with runtime.dry_run():` plans calls instead of making them (read-only tools still run); "
        "`async with runtime.plan('what it does') as p:` runs its block dry, asks the user once to approve "
        "every call in it, then runs it again for real (p.dry is True the first time); "
        "a call the user must approve waits for them, and a refusal raises PermissionError. "
        "Each run has a timeout: for longer work, `job = runtime.start_job(async_fn)` runs it in the "
        "background between runs (runtime.jobs() lists jobs and their output, `await runtime.wait(job)` "
        "collects the value, job.cancel() stops it); asyncio tasks keep running between runs too."
        + _registry_summary()
        + _skills_summary()
    )


def _registry_summary():
    """The registry part of capability_summary(): the order to follow, when the host offers a registry."""
    registry = context.current().config.get("registry")
    if not isinstance(registry, dict):
        return ""
    text = (" When no configured tool fits (search_tool_docs first), await runtime.find_servers(query) searches "
            "the MCP registry")
    if registry.get("add") in ("ask", "allow"):
        asks = "asks the user, then " if registry.get("add") == "ask" else ""
        return text + (f", and await runtime.add_server(name, alias=None) {asks}makes mcp_<alias> callable in "
                       "the same run.")
    return text + "; adding servers is off here, so tell the user which one would help."


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


def _public(server):
    return {"name": server["name"], "description": str(server.get("description") or ""),
            "alias": server["alias"]}


def _names(servers):
    return tuple(s["name"] if isinstance(s, dict) else s for s in servers or ())


def _detail(detail):
    value = str(detail).lower() if detail is not None else "summary"
    if value not in _DETAILS:
        raise mcp_error(ValueError, f"Unknown detail {detail!r}: use 'summary' or 'full'")
    return value


def _docs_params(server, tool, detail):
    params = {"server": _proxy.server_name(server), "detail": _detail(detail)}
    if tool is not None:
        if not isinstance(tool, str):
            raise mcp_error(TypeError, "'tool' must be a string when provided")
        params["tool"] = tool
    return params


def _search_params(query, limit, detail):
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        raise mcp_error(TypeError, f"'limit' must be a whole number, not {limit!r}") from None
    params = {"query": str(query), "limit": limit}
    if _detail(detail) == "full":
        params["detail"] = "full"
    return params


def _docs(answer):
    """Host docs with the bridge's keys added: serverAlias, toolAlias."""
    docs = []
    for doc in answer if isinstance(answer, list) else ():
        if isinstance(doc, dict) and isinstance(doc.get("tool"), str):
            server = doc.get("server")
            proxy = _proxy.proxy_for(server) if isinstance(server, str) else None
            server_alias = proxy._ServerProxy__state.alias if proxy else _proxy.alias_of(str(server))
            docs.append({**doc, "serverAlias": server_alias, "toolAlias": doc.get("alias") or
                         _proxy.alias_of(doc["tool"])})
    return docs


def _docs_answer(answer, tool, single):
    docs = _docs(answer)
    if tool is None or not docs:
        return docs
    exact = [doc for doc in docs if doc["tool"] == tool] or docs
    return exact[0] if single else exact[:1]


def _remember(name, value):
    proxy = _proxy.proxy_for(name)
    if proxy is not None:
        proxy._ServerProxy__state.remember(value)
        return proxy._ServerProxy__state.tools
    return _proxy.normalise_tools(value)
