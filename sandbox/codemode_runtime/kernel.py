"""One sandbox session without its transport: namespace, proxies, RPC, frames in and `done` frames out.

A transport (process.py for CPython, a Pyodide host's glue) owns how frames travel, how output is
captured and how timeouts interrupt; it drives the kernel through `handle`, `run`/`run_async` and
`done_frame`.
"""
import builtins
import sys
import types

from . import context
from .executor import Executor
from .rpc import RpcClient

DEFAULT_MAX_OUTPUT = 1024 * 1024
DEFAULT_TIMEOUT = 30.0
_MAX_TEXT_CHARS = 1024 * 1024  # value/error text cap: keeps a done frame far below the frame limit


class Kernel:
    """The transport-free core of a session.

    `send(frame)` delivers a frame to the host and may be called from any thread. `block(event)` is how
    synchronous RPCs wait (see RpcClient). `namespace` defaults to a fresh `__main__` module's dict.
    """

    def __init__(self, config, send, *, block=None, namespace=None):
        self.config = normalise_config(config)
        self.send = send
        self.clock = None
        """What `pause`/`resume` frames stop and restart: the transport's timeout (`pause(id)`, `resume(id)`)."""
        self.rpc = RpcClient(send, block)
        self.namespace = namespace if namespace is not None else _main_module().__dict__
        self.executor = Executor(self.namespace)
        context.kernel = self
        self._install_api()

    def handle(self, frame):
        """Takes a host frame that needs no execution (rpc_result, pause, resume); False for anything else."""
        kind = frame.get("type")
        if kind == "rpc_result":
            self.rpc.resolve(frame)
            return True
        if kind in ("pause", "resume") and self.clock is not None:
            getattr(self.clock, kind)(frame.get("id"))
            return True
        return False

    def run(self, code, drive):
        """Runs a cell; awaitable parts go through `drive(coroutine) -> value` (CPython path)."""
        return self.executor.run(code, drive)

    async def run_async(self, code):
        """Runs a cell inside the running event loop (Pyodide path)."""
        return await self.executor.run_async(code)

    def done_frame(self, execution_id, outcome, *, timed_out_after=None, dropped=None):
        """The `done` frame for an outcome; `timed_out_after` (seconds) turns an error into a timeout."""
        frame = {"type": "done", "id": execution_id, "status": outcome.status}
        if timed_out_after is not None and outcome.status == "error":
            frame["status"] = "timeout"
            detail = outcome.error if (outcome.error or "").startswith("Traceback") else ""
            frame["error"] = _clip(
                f"Timed out after {timed_out_after:g}s: execution was interrupted; "
                f"globals assigned before that point are kept\n{detail}"
            )
        elif outcome.error is not None:
            frame["error"] = _clip(outcome.error)
        if outcome.value is not None:
            frame["value"] = _clip(outcome.value)
        if dropped and any(dropped.values()):
            frame["dropped"] = dropped
        return frame

    def _install_api(self):
        import mcp
        from mcp import _proxy, servers

        proxies = _proxy.build(self.config["servers"])
        servers.register(self.config["servers"], proxies)
        self.namespace.setdefault("__builtins__", builtins)
        names = [server["name"] for server in self.config["servers"]]
        self.namespace["mcp_servers"] = {name: proxies[name] for name in names}
        for server in self.config["servers"]:
            self.namespace[f"mcp_{server['alias']}"] = proxies[server["name"]]
        self.namespace["ToolError"] = mcp.ToolError


def normalise_config(config):
    """Fills defaults and checks the shape of the bootstrap config."""
    config = dict(config or {})
    config["max_output"] = int(config.get("max_output") or DEFAULT_MAX_OUTPUT)
    servers = []
    from mcp._proxy import alias_of

    for server in config.get("servers") or []:
        if isinstance(server, str):
            server = {"name": server}
        name = str(server["name"])
        servers.append({**server, "name": name, "alias": str(server.get("alias") or alias_of(name))})
    config["servers"] = servers
    return config


def timeout_of(frame):
    """The execute frame's timeout in seconds, or the default when it is missing or not positive."""
    try:
        seconds = float(frame.get("timeout"))
    except (TypeError, ValueError):
        return DEFAULT_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_TIMEOUT


def _main_module():
    """A fresh `__main__`, so pickle, dataclasses and typing find user classes by module name."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    return module


def _clip(text):
    if len(text) <= _MAX_TEXT_CHARS:
        return text
    return text[:_MAX_TEXT_CHARS] + f"\n... [{len(text) - _MAX_TEXT_CHARS} more characters not shown]"
