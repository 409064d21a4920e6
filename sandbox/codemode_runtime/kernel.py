"""One sandbox session without its transport: namespace, proxies, RPC, frames in and `done` frames out.

A transport (process.py for CPython, a Pyodide host's glue) owns how frames travel, how output is
captured and how timeouts interrupt; it drives the kernel through `handle`, `begin`, `run_async` (in a task
of the session's loop, created in the context `begin` returns) and `done_frame`. The loop keeps running
between runs, so jobs and tasks a run left running go on (jobs.py).
"""
import asyncio
import builtins
import sys
import threading
import types

from . import asyncio_run, context, figures
from .artifacts import Artifacts
from .display import DEFAULT_MAX_DISPLAY, Displayer
from .executor import Executor
from .files import FileReceiver
from .job import OutputRouter, Run
from .jobs import DEFAULT_MAX_JOBS, Jobs
from .rpc import RpcClient

DEFAULT_MAX_OUTPUT = 1024 * 1024
DEFAULT_TIMEOUT = 30.0
_MAX_TEXT_CHARS = 1024 * 1024  # value/error text cap: keeps a done frame far below the frame limit


class Kernel:
    """The transport-free core of a session.

    `send(frame)` delivers a frame to the host and may be called from any thread. `block(event)` is how
    synchronous RPCs wait (see RpcClient). `namespace` defaults to a fresh `__main__` module's dict. `loop`
    is the session's event loop (default: the current one); `threads` says whether plain functions may run
    as jobs in threads.
    """

    def __init__(self, config, send, *, block=None, namespace=None, loop=None, threads=True):
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
        self.loop = loop if loop is not None else asyncio.get_event_loop()
        self._loop_thread = threading.get_ident()
        self.jobs = Jobs(send, self.loop, self.call_in_loop, max_jobs=self.config["max_jobs"], threads=threads,
                         describe=lambda exc: self.executor.failure(exc).error)
        self.rpc.job_of = self.display.job_of = self.jobs.job_here
        self.run = None
        """The Run whose code is executing, if any."""
        context.kernel = self
        asyncio_run.install()
        figures.install()
        self._install_api()

    def call_in_loop(self, callback, *args):
        """Runs `callback` on the loop's thread: now when already there, else as soon as the loop can."""
        if threading.get_ident() == self._loop_thread:
            callback(*args)
        else:
            self.loop.call_soon_threadsafe(callback, *args)

    def sync_output(self):
        """Pushes output written so far to the host, so a display lands after it; transports that capture
        more than sys.stdout/sys.stderr replace this."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    def begin(self, execution_id):
        """Starts a run: displays sent from now on belong to `execution_id`. Returns the context the run's
        task must be created in (its code belongs to the run)."""
        self.display.begin(execution_id)
        self.run = Run(execution_id)
        return self.jobs.run_context(self.run)

    def routers(self, stdout, stderr):
        """sys.stdout and sys.stderr for a transport's streams: a job's output goes to the job."""
        return OutputRouter(self.jobs, "stdout", stdout), OutputRouter(self.jobs, "stderr", stderr)

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
        if kind == "cancel_job":
            self.jobs.cancel_from_host(frame.get("id"), frame.get("reason"))
            return True
        return False

    async def run_async(self, code):
        """Runs a cell; call it from the task `begin` said how to create."""
        return self._end(await self.executor.run_async(code))

    def _end(self, outcome):
        """Shows the figures the cell left open (closes them unshown after a timeout); a figure that fails
        to render fails a cell that didn't fail. Tasks the cell left running become jobs."""
        interrupted = isinstance(outcome.exception, (KeyboardInterrupt, asyncio.CancelledError))
        try:
            self.display.end(render=not interrupted)
        except Exception as exc:  # KeyboardInterrupt (a timeout) goes on to the transport
            if outcome.status == "ok":
                outcome = self.executor.failure(exc)
        self.end_run(outcome)
        return outcome

    def end_run(self, outcome=None):
        """Ends the active run (once): tasks it left running become jobs; a note about any cancelled over
        CODEMODE_MAX_JOBS rides on `outcome`."""
        run, self.run = self.run, None
        if run is None:
            return
        note = self.jobs.run_ended(run, own_task=_current_task())
        if note and outcome is not None:
            outcome.notes.append(note)

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
        if outcome.notes:
            frame["notes"] = [_clip(note)[:2000] for note in outcome.notes[:10]]
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
    config["max_jobs"] = int(config.get("max_jobs") or DEFAULT_MAX_JOBS)
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


def _current_task():
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


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
