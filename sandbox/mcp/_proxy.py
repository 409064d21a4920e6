"""Proxies: `mcp_<alias>.<tool>(**kwargs)` awaits a tool call on the host."""
import asyncio
import re

from codemode_runtime import context
from codemode_runtime.rpc import ToolError, mcp_error

from . import _dry_run, _plan

_registry = {}  # server name -> ServerProxy


def alias_of(name):
    """The Python identifier for a server or tool name: non-identifier characters become "_"."""
    alias = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if alias[:1].isdigit():
        alias = "_" + alias
    return alias or "_"


def build(servers):
    """Creates (or reuses) one proxy per configured server; returns {name: proxy}."""
    for server in servers:
        if server["name"] not in _registry:
            _registry[server["name"]] = ServerProxy(server["name"], server["alias"])
    return dict(_registry)


def proxy_for(server):
    """The proxy for a configured server name or alias, or None."""
    if server in _registry:
        return _registry[server]
    return next((p for p in _registry.values() if p._ServerProxy__state.alias == server), None)


def server_name(server):
    """Accepts a server name or its alias and returns the name the host knows."""
    proxy = proxy_for(server)
    return proxy._ServerProxy__state.name if proxy else server


async def call_tool(server, tool, arguments=None, raw=False):
    """Awaits one tool call on the host; a tool error raises ToolError naming the server and tool."""
    params = {"server": server_name(server), "tool": tool, "arguments": dict(arguments or {})}
    params["raw"] = bool(raw)
    plan = _plan.current()
    if plan is not None:
        params["plan"] = plan[0]
    if _dry_run.active() or (plan is not None and plan[1]):
        params["dry_run"] = True
    try:
        return await context.current().rpc.call("call_tool", params)
    except ToolError as error:
        error.server, error.tool = params["server"], tool
        raise


def normalise_tools(value):
    """Tool entries from a list_tools answer, in the shapes of both the bridge's list_tools (an MCP tool:
    name, description, inputSchema) and its server metadata (name, alias, description, input_schema)."""
    items = value.get("tools") if isinstance(value, dict) else value
    tools = []
    for item in items if isinstance(items, (list, tuple)) else ():
        if isinstance(item, str):
            item = {"name": item}
        name = item.get("name") or item.get("tool") if isinstance(item, dict) else None
        if isinstance(name, str):  # the host sends {server, tool, alias, description, inputSchema, ...}
            schema = item.get("inputSchema", item.get("input_schema"))
            if schema is None:
                schema = {"type": "object", "properties": {}}
            tools.append({
                **item,
                "name": name,
                "alias": alias_of(name),
                "description": str(item.get("description") or ""),
                "inputSchema": schema,
                "input_schema": schema,
            })
    return tools


def aliases(tools):
    """{alias or name: name}, resolved as the host resolves them: a tool's own name always wins, and of
    tools whose names share an alias ("get-file", "get.file") the first listed owns it."""
    by_alias = {}
    for tool in tools:
        by_alias.setdefault(tool["alias"], tool["name"])
    by_alias.update({tool["name"]: tool["name"] for tool in tools})
    return by_alias


class _State:
    def __init__(self, name, alias):
        self.name = name
        self.alias = alias
        self.tools = None  # cached normalised list_tools answer
        self.by_alias = {}
        self.fetch = None  # in-flight list_tools task, shared by concurrent callers
        self.proxies = {}
        self.docs = {}

    def remember_task(self, task):
        if not task.cancelled() and task.exception() is None:
            self.remember(task.result())

    def remember(self, value):
        self.tools = normalise_tools(value)
        self.by_alias = aliases(self.tools)


class ServerProxy:
    """One MCP server. Attributes are its tools (by alias); dir() lists them."""

    def __init__(self, name, alias):
        self.__state = _State(name, alias)

    def __getattr__(self, attribute):
        dunder = attribute.startswith("__") and attribute.endswith("__")
        # Display hooks (display(), a proxy as a cell's value) probe _repr_*_ and IPython's _ipython_*_:
        # those are never tools, or a probe would start a call.
        if dunder or attribute.startswith(("_ServerProxy__", "_repr_", "_ipython_")):
            raise AttributeError(attribute)
        state = self.__state
        proxy = state.proxies.get(attribute)
        if proxy is None:
            proxy = state.proxies[attribute] = ToolProxy(self, attribute)
        return proxy

    def __dir__(self):
        return sorted({tool["alias"] for tool in self._tools_sync()})

    def __repr__(self):
        state = self.__state
        return f"<MCP server {state.name!r} as mcp_{state.alias}: dir() lists its tools, help() shows one>"

    def _tools_sync(self, refresh=False):
        state = self.__state
        if state.tools is None or refresh:
            state.remember(context.current().rpc.call_sync("list_tools", {"server": state.name}))
        return state.tools

    async def _tools(self, refresh=False):
        state = self.__state
        if state.tools is not None and not refresh:
            return state.tools
        loop = asyncio.get_running_loop()
        if state.fetch is None or state.fetch.done() or state.fetch.get_loop() is not loop:
            state.fetch = loop.create_task(context.current().rpc.call("list_tools", {"server": state.name}))
            state.fetch.add_done_callback(state.remember_task)
        await asyncio.shield(state.fetch)
        return state.tools

    async def _tool_name(self, alias):
        # A name without "_" has no characters to map back, so it can only be itself.
        state = self.__state
        if "_" not in alias or alias in state.by_alias:
            return state.by_alias.get(alias, alias)
        await self._tools(refresh=state.tools is not None)
        return state.by_alias.get(alias, alias)

    def _tool_name_sync(self, alias):
        state = self.__state
        if "_" not in alias or alias in state.by_alias:
            return state.by_alias.get(alias, alias)
        self._tools_sync(refresh=state.tools is not None)
        return state.by_alias.get(alias, alias)

    async def _call(self, alias, arguments):
        raw = arguments.pop("raw", False)
        if alias == "list_tools" and not arguments:
            # The bridge's proxies have list_tools(); a server's own tool of that name still wins.
            tools = await self._tools(refresh=True)
            if alias not in self.__state.by_alias:
                return [dict(tool) for tool in tools]
        name = await self._tool_name(alias)
        return await call_tool(self.__state.name, name, arguments, raw)

    def _docs(self, alias):
        """(help text, signature) for a tool: its stub from the host (core/catalog/stubs.ts), fetched once."""
        import inspect

        state = self.__state
        if alias not in state.docs:
            usage = f"Usage: await mcp_{state.alias}.{alias}(...); raw=True returns the whole MCP result."
            try:
                name = self._tool_name_sync(alias)
                stub = context.current().rpc.call_sync("stubs", {"server": state.name, "tool": name})
                state.docs[alias] = (f"{stub['text']}\n\n{usage}", _signature(stub["signature"]))
            except Exception as error:  # help() must not blow up on a missing tool or a dead server
                text = f"No documentation for tool {alias!r} on server {state.name!r}: {error}\n\n{usage}"
                anything = inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD)
                return text, inspect.Signature([anything])
        return state.docs[alias]


class _Text:
    """A type or default as the stub writes it: help() shows it as it is (`list[str]`, `...`)."""

    def __init__(self, text):
        self.text = str(text)

    def __repr__(self):
        return self.text


def _signature(signature):
    """An inspect.Signature from a stub's signature: keyword-only parameters, **arguments when open."""
    import inspect

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter(p["name"], keyword, annotation=_Text(p["type"]),
                          default=inspect.Parameter.empty if p.get("required") else _Text(p.get("default", "...")))
        for p in signature.get("params") or []
    ]
    if signature.get("extra"):
        parameters.append(inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD, annotation=_Text("Any")))
    return inspect.Signature(parameters, return_annotation=_Text(signature.get("returns") or "Any"))


class ToolProxy:
    """One tool: call it with keyword arguments and await the result; help() shows its schema."""

    def __init__(self, server, alias):
        self.__server = server
        self.__name__ = alias
        self.__qualname__ = f"mcp_{server._ServerProxy__state.alias}.{alias}"
        self.__module__ = f"mcp.servers.{server._ServerProxy__state.alias}"

    def __call__(self, *args, **kwargs):
        if args:
            raise mcp_error(TypeError, f"Tool {self.__qualname__!r} takes keyword arguments only: call it as "
                                       f"await {self.__qualname__}(name=value, ...)")
        return self.__server._call(self.__name__, kwargs)

    def __get__(self, instance, owner=None):
        # Makes inspect/pydoc treat the proxy as a routine, so help() shows its signature and doc.
        return self

    @property
    def __doc__(self):
        return self.__server._docs(self.__name__)[0]

    @property
    def __signature__(self):
        return self.__server._docs(self.__name__)[1]

    def __repr__(self):
        return f"<MCP tool {self.__qualname__}: await it with keyword arguments; help() documents it>"


def _pick(answer, name):
    if isinstance(answer, dict) and isinstance(answer.get("tools"), list):
        answer = answer["tools"]
    if isinstance(answer, list):
        named = [d for d in answer if isinstance(d, dict) and name in (d.get("name"), d.get("tool"))]
        answer = named[0] if named else (answer[0] if answer else {})
    return answer if isinstance(answer, dict) else {"description": str(answer)}
