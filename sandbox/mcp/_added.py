"""Servers added from the MCP registry: the host searches the registry, asks the user and starts the
server; this module makes an added server callable in this sandbox (`mcp_<alias>`, `mcp_servers[name]`,
`mcp.servers.<alias>`) and forgets it again when it is removed."""
import sys

from codemode_runtime import context
from codemode_runtime.rpc import mcp_error

from . import _proxy, servers


def find_params(query, limit):
    """The find_servers parameters, checked."""
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        raise mcp_error(TypeError, f"'limit' must be a whole number, not {limit!r}") from None
    return {"query": str(query), "limit": limit}


def add_params(name, version, env, alias):
    """The add_server parameters, checked: env is a dict of strings, the rest strings or None."""
    if not isinstance(name, str) or not name:
        raise mcp_error(TypeError, "add_server(name) needs the server's registry name, as find_servers() gives it")
    params = {"name": name}
    if version is not None:
        params["version"] = str(version)
    if env is not None:
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise mcp_error(TypeError, "env must be a dict of strings (variable name -> value)")
        params["env"] = dict(env)
    if alias is not None:
        params["alias"] = str(alias)
    return params


def added(info):
    """Registers the server the host just added and returns what add_server returns."""
    register({"name": info["alias"], "alias": info["alias"],
              "added": {"name": info.get("name"), "version": info.get("version")}})
    return {key: info[key] for key in ("alias", "name", "version", "tools", "kept") if key in info}


def register(server):
    """Makes one server callable: mcp_<alias>, mcp_servers[name], mcp.servers.<alias>, LOADED_MCP_SERVERS."""
    kernel = context.current()
    config = kernel.config["servers"]
    if not any(s["name"] == server["name"] for s in config):
        config.append(server)
    proxies = _proxy.build([server])
    servers.register([server], proxies)
    proxy = proxies[server["name"]]
    kernel.api["mcp_servers"][server["name"]] = proxy  # the namespace holds the same dict
    kernel.api[f"mcp_{server['alias']}"] = proxy
    kernel.namespace[f"mcp_{server['alias']}"] = proxy
    _loaded(kernel)


def unregister(alias):
    """Forgets a removed server: its global, its mcp_servers entry, its module and its proxy."""
    kernel = context.current()
    config = kernel.config["servers"]
    server = next((s for s in config if s["alias"] == alias and s.get("added")), None)
    if server is None:
        return
    config.remove(server)
    _proxy._registry.pop(server["name"], None)
    kernel.api["mcp_servers"].pop(server["name"], None)
    for scope in (kernel.api, kernel.namespace):
        scope.pop(f"mcp_{alias}", None)
    sys.modules.pop(f"{servers.__name__}.{alias}", None)
    if hasattr(servers, alias):
        delattr(servers, alias)
    if alias in servers.__all__:
        servers.__all__.remove(alias)
    _loaded(kernel)


def _loaded(kernel):
    kernel.namespace["LOADED_MCP_SERVERS"] = tuple(s["name"] for s in kernel.config["servers"])
