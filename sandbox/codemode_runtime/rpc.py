"""Calls into the host: `rpc` frames out, `rpc_result` frames back, many in flight at once."""
import asyncio
import builtins
import itertools
import threading

from .values import decode_value


class MCPError(RuntimeError):
    """Raised when an MCP call fails: the base of ToolError and of every error a call into the host
    raises (as the Python bridge's runtime.MCPError)."""


class ToolError(MCPError):
    """A tool reported an error (isError), or the host could not run it; carries the server's message."""

    def __init__(self, message, *, server=None, tool=None):
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool


MCPError.__module__ = ToolError.__module__ = "mcp"

_FLAVOURS = {}


def mcp_error(kind, message):
    """An exception that is both `kind` (a built-in exception class) and MCPError, e.g. a PermissionError
    that `except MCPError` also catches. Tracebacks name it as the built-in, which is what it acts as."""
    if kind is RuntimeError or kind is MCPError:
        return MCPError(message)
    flavour = _FLAVOURS.get(kind)
    if flavour is None:
        flavour = _FLAVOURS[kind] = type(kind.__name__, (MCPError, kind), {
            "__module__": "builtins",
            "__doc__": f"{kind.__name__} from a call into the host; also an mcp.MCPError.",
        })
    return flavour(message)


class RpcClient:
    """Sends rpc frames through `send(frame)` and settles waiters when `resolve(frame)` gets the answer.

    `resolve` may run on any thread. Blocking calls wait with `block(event)`; a transport without threads
    passes one that fails unless the host answered while `send` was still running. A call made by a job
    names it (`job`), so the host serves it under the job's context instead of a run's.
    """

    def __init__(self, send, block=None):
        self._send = send
        self._block = block or threading.Event.wait
        self._pending = {}
        self._ids = itertools.count(1)
        self.job_of = None
        """Returns the Job the calling code belongs to, or None (set by the kernel)."""

    async def call(self, method, params):
        """Awaits the host's answer to `method(params)`; raises what the host reported."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        rid = next(self._ids)
        self._pending[rid] = lambda frame: _deliver(loop, future, frame)
        try:
            _send_call(self._send, self._frame(rid, method, params))
            frame = await future
        finally:
            self._pending.pop(rid, None)
        return result_of(frame)

    def call_sync(self, method, params):
        """Blocks the calling thread until the host answers `method(params)`."""
        event = threading.Event()
        answer = []
        rid = next(self._ids)
        self._pending[rid] = lambda frame: (answer.append(frame), event.set())
        try:
            _send_call(self._send, self._frame(rid, method, params))
            if not event.is_set():
                self._block(event)
        finally:
            self._pending.pop(rid, None)
        return result_of(answer[0])

    def _frame(self, rid, method, params):
        frame = {"type": "rpc", "id": rid, "method": method, "params": params}
        job = self.job_of() if self.job_of is not None else None
        if job is not None:
            frame["job"] = job.id
            if method == "call_tool":
                job.tool_calls += 1
        return frame

    def resolve(self, frame):
        """Hands an rpc_result frame to whoever waits for it; unknown or late ids are ignored."""
        waiter = self._pending.pop(frame.get("id"), None)
        if waiter is not None:
            waiter(frame)

    def pending(self):
        """How many calls are waiting for an answer."""
        return len(self._pending)

    def can_block(self):
        """Whether call_sync can wait for an answer here (a transport without threads may not)."""
        return self._block is not refuse_blocking


def _send_call(send, frame):
    try:
        send(frame)
    except ValueError as error:  # over the frame cap: the caller's error, raised as the call's
        raise mcp_error(ValueError, str(error)) from None


def refuse_blocking(event):
    """The `block` of a transport without threads: a blocking call whose answer did not come during
    send() can never be answered, so fail instead of hanging."""
    raise RuntimeError("Blocking calls are not available in this sandbox: use the async variant with await")


def _deliver(loop, future, frame):
    # Read by the loop itself (see channel.py): settle at once instead of waking the loop through its pipe.
    if asyncio._get_running_loop() is loop:
        _settle(future, frame)
    else:
        loop.call_soon_threadsafe(_settle, future, frame)


def _settle(future, frame):
    if not future.done():
        future.set_result(frame)


def result_of(frame):
    """The decoded value of an rpc_result frame, or the matching exception raised."""
    if frame.get("ok"):
        return decode_value(frame.get("value"))
    raise error_from(frame.get("error"))


def error_from(error):
    """Builds the exception for a host error {type, message}: ToolError, a built-in error that is also an
    MCPError, or MCPError itself; every one of them is an MCPError."""
    error = error if isinstance(error, dict) else {}
    kind = str(error.get("type") or "RuntimeError")
    message = str(error.get("message") or kind)
    if kind == "ToolError":
        return ToolError(message)
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls is not Exception:
        try:
            return mcp_error(cls, message)
        except Exception:  # a built-in that can't be combined with MCPError (none is known)
            pass
    return MCPError(message if kind in ("Error", "RuntimeError", "MCPError") else f"{kind}: {message}")
