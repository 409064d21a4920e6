"""`from mcp.servers.<alias> import <tool>` (or `*`): one module per configured server, filled lazily."""
import keyword
import sys
import types
from importlib.machinery import ModuleSpec

_PROXY = "__codemode_server__"


__all__ = []
"""Aliases of the configured servers (filled by register()), as the bridge's mcp.servers.__all__."""


class ServerModule(types.ModuleType):
    """mcp.servers.<alias>: its attributes are the server's tools; __all__ lists them, TOOLS holds their
    metadata and TOOL_MAP the same by alias (as the bridge's modules; all via one list_tools)."""

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attribute!r}")
        proxy = self.__dict__[_PROXY]
        if attribute in ("TOOLS", "TOOL_MAP"):
            tools = [dict(tool) for tool in proxy._tools_sync()]
            return tools if attribute == "TOOLS" else {tool["alias"]: tool for tool in tools}
        return getattr(proxy, attribute)

    @property
    def __all__(self):
        # `import *` takes every name listed here: only aliases this module can hand out (a tool whose
        # alias starts with "__" or is a keyword stays reachable through runtime.call_tool).
        return [alias for alias in dir(self.__dict__[_PROXY]) if importable(alias)]

    def __dir__(self):
        return sorted(set(self.__dict__) | set(self.__all__))


def importable(alias):
    """Whether `from mcp.servers.<server> import *` can export a tool under this alias."""
    return alias.isidentifier() and not keyword.iskeyword(alias) and not alias.startswith("__")


def register(servers, proxies):
    """Makes mcp.servers.<alias> importable for every configured server."""
    package = sys.modules[__name__]
    for server in servers:
        name = f"{__name__}.{server['alias']}"
        module = ServerModule(name, f"Tools of MCP server {server['name']!r}")
        module.__dict__[_PROXY] = proxies[server["name"]]
        module.__spec__ = ModuleSpec(name, None)
        module.__package__ = __name__
        sys.modules[name] = module
        setattr(package, server["alias"], module)
        if server["alias"] not in __all__:
            __all__.append(server["alias"])
