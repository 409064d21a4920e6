"""One sandbox session without its transport: namespace, proxies, RPC, frames in and `done` frames out.

A transport (process.py for CPython, a Pyodide host's glue) owns how frames travel, how output is
captured and how timeouts interrupt; it drives the kernel through `handle`, `run`/`run_async` and
`done_frame`.
"""
import asyncio
import builtins
import sys
import types

from . import context, figures
from .artifacts import Artifacts
from .display import DEFAULT_MAX_DISPLAY, Displayer
from .executor import Executor
from .files import FileReceiver
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
        self.display = Displayer(send, self.config["max_display"], sync_output=lambda: self.sync_output())
        self.executor = Executor(self.namespace, display_value=self.display.display_value)
        self.artifacts = Artifacts(send, self.config)
        self.files = FileReceiver(send)
        context.kernel = self
        figures.install()
        self._install_api()

    def sync_output(self):
        """Pushes output written so far to the host, so a display lands after it; transports that capture
        more than sys.stdout/sys.stderr replace this."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    def begin(self, execution_id):
        """Starts a run: displays sent from now on belong to `execution_id`."""
        self.display.begin(execution_id)

    def handle(self, frame):
        """Takes a host frame that needs no execution (rpc_result, file, pause, resume); False for anything
        else."""
        kind = frame.get("type")
        if kind == "rpc_result":
            self.rpc.resolve(frame)
            return True
        if kind == "file":
            self.files.handle(frame)
            return True
        if kind in ("pause", "resume") and self.clock is not None:
            getattr(self.clock, kind)(frame.get("id"))
            return True
        return False

    def run(self, code, drive):
        """Runs a cell; awaitable parts go through `drive(coroutine) -> value` (CPython path)."""
        return self._end(self.executor.run(code, drive))

    async def run_async(self, code):
        """Runs a cell inside the running event loop (Pyodide path)."""
        return self._end(await self.executor.run_async(code))

    def _end(self, outcome):
        """Shows the figures the cell left open (closes them unshown after a timeout); a figure that fails
        to render fails a cell that didn't fail."""
        interrupted = isinstance(outcome.exception, (KeyboardInterrupt, asyncio.CancelledError))
        try:
            self.display.end(render=not interrupted)
        except Exception as exc:  # KeyboardInterrupt (a timeout) goes on to the transport
            if outcome.status == "ok":
                return self.executor.failure(exc)
        return outcome

    def collect_artifacts(self, execution_id):
        """Sends the run's new and changed artifacts; call after the code ran and before the done frame."""
        self.artifacts.collect(execution_id)

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
        if outcome.check:
            frame["check"] = outcome.check
        if dropped and any(dropped.values()):
            frame["dropped"] = dropped
        return frame

    def _install_api(self):
        import mcp
        from mcp import _plan, _precheck, _proxy, _skills, servers

        proxies = _proxy.build(self.config["servers"])
        servers.register(self.config["servers"], proxies)
        self.namespace.setdefault("__builtins__", builtins)
        self.namespace.setdefault("asyncio", asyncio)  # as the bridge's prompts assume
        builtins.display = self.display.display  # as in IPython
        setattr(builtins, _plan.PASSES, _plan.passes)  # what a rewritten `async with runtime.plan()` loops over
        names = [server["name"] for server in self.config["servers"]]
        # The globals user code gets; skills imported later get the same ones.
        self.api = {"mcp_servers": {name: proxies[name] for name in names}, "ToolError": mcp.ToolError}
        for server in self.config["servers"]:
            self.api[f"mcp_{server['alias']}"] = proxies[server["name"]]
        self.namespace.update(self.api)
        # As in the bridge's sandbox: the mcp package and the server names without an import.
        self.namespace.setdefault("mcp", mcp)
        self.namespace["LOADED_MCP_SERVERS"] = tuple(names)
        _skills.install()
        self.executor.prepare = _precheck.Gate()


def normalise_config(config):
    """Fills defaults and checks the shape of the bootstrap config."""
    config = dict(config or {})
    config["max_output"] = int(config.get("max_output") or DEFAULT_MAX_OUTPUT)
    config["precheck"] = "off" if config.get("precheck") == "off" else "on"
    max_display = config.get("max_display")
    config["max_display"] = DEFAULT_MAX_DISPLAY if max_display is None else max(int(max_display), 0)
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
