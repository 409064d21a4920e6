"""The in-process transport, for hosts that run Python inside themselves (Pyodide): no threads, no fd
capture, no signals.

The host creates one EmbeddedSession with `write(line)`, a function taking each outgoing frame as a
JSON line, and awaits `handle(frame)` for every incoming frame (a dict or a JSON line). A host that can
wait synchronously for an answer (e.g. through shared memory) passes `block(event)`, which must return
once the answer was handed to `handle`; by default blocking calls fail. Output is
captured by replacing sys.stdout/sys.stderr. Timeouts cancel the running task at its next await; code
that never awaits can only be stopped by the host (Pyodide's interrupt buffer raises KeyboardInterrupt,
or the host drops the whole interpreter). `pause`/`resume` frames stop and restart the timeout while the
host waits for a person. Runs are tasks of the host's loop, which keeps running between runs, so jobs go on
(async ones only: without threads, a plain function cannot run in the background).
"""
import asyncio
import sys
import time

from .executor import Outcome
from .frames import decode, encode
from .kernel import Kernel, timeout_of
from .output import FrameWriter, OutputStream
from .rpc import refuse_blocking


class EmbeddedSession:
    """A kernel driven frame by frame by its host, inside the host's own event loop."""

    def __init__(self, config, write, *, block=refuse_blocking, namespace=None, threads=False):
        self._write = write
        self.kernel = Kernel(config, self.send, block=block, namespace=namespace, threads=threads)
        limit = self.kernel.config["max_output"]
        self._streams = (OutputStream("stdout", self.send, limit), OutputStream("stderr", self.send, limit))
        self._writers = tuple(FrameWriter(stream) for stream in self._streams)
        sys.stdout, sys.stderr = self.kernel.routers(*self._writers)
        self._current = None
        self._deadline = 0.0
        self._paused_at = None
        self.kernel.clock = self

    def send(self, frame):
        """Hands one frame to the host as a JSON line; ValueError when it is over the size cap."""
        self._write(encode(frame).decode("utf-8"))

    def pause(self, execution_id):
        """The host waits for a person: execution `execution_id`'s timeout stops."""
        if execution_id == self._current and self._paused_at is None:
            self._paused_at = time.monotonic()

    def resume(self, execution_id):
        """The wait is over: the timeout runs again with the time that was left."""
        if execution_id == self._current and self._paused_at is not None:
            self._deadline += time.monotonic() - self._paused_at
            self._paused_at = None

    def ready_frame(self):
        """The frame that tells the host the runtime is up."""
        return {"type": "ready", "python": sys.version.split()[0]}

    async def handle(self, frame):
        """Takes one host frame; an execute frame is run to its done frame before this returns."""
        if isinstance(frame, (str, bytes)):
            frame = decode(frame)
        if not frame:
            return
        if frame.get("type") == "execute":
            await self.execute(frame)
        else:
            self.kernel.handle(frame)

    async def execute(self, frame):
        """Runs one execute frame and sends its output and done frame."""
        execution_id = frame.get("id")
        timeout = timeout_of(frame)
        for stream in self._streams:
            stream.begin(execution_id)
        context = self.kernel.begin(execution_id)
        self._current, self._deadline, self._paused_at = execution_id, time.monotonic() + timeout, None
        task = self.kernel.loop.create_task(self.kernel.run_async(frame.get("code") or ""), context=context)
        while not task.done():
            left = self._deadline - time.monotonic()
            if self._paused_at is None and left <= 0:
                task.cancel()
                await asyncio.wait({task})
                break
            await asyncio.wait({task}, timeout=left if self._paused_at is None else 0.5)
        # Past the deadline also when the host's interrupt (not our cancel) ended the task.
        overran = (self._paused_at or time.monotonic()) >= self._deadline
        self._current = None
        try:
            outcome = task.result()
        except BaseException as exc:  # interrupted outside the user's code, e.g. rendering a figure
            outcome = Outcome("error", error=f"{type(exc).__name__}\n", exception=exc)
            self.kernel.end_run(outcome)
        for writer in self._writers:
            writer.flush()
        self.kernel.collect_artifacts(execution_id)
        dropped = {stream.name: stream.finish() for stream in self._streams}
        self.send(self.kernel.done_frame(execution_id, outcome, timed_out_after=timeout if overran else None,
                                         dropped=dropped))

