"""The in-process transport, for hosts that run Python inside themselves (Pyodide): no threads, no fd
capture, no signals.

The host creates one EmbeddedSession with `write(line)`, a function taking each outgoing frame as a
JSON line, and awaits `handle(frame)` for every incoming frame (a dict or a JSON line). A host that can
wait synchronously for an answer (e.g. through shared memory) passes `block(event)`, which must return
once the answer was handed to `handle`; by default blocking calls fail. Output is
captured by replacing sys.stdout/sys.stderr. Timeouts cancel the running task at its next await; code
that never awaits can only be stopped by the host (Pyodide's interrupt buffer raises KeyboardInterrupt,
or the host drops the whole interpreter).
"""
import asyncio
import sys
import time

from .frames import decode, encode
from .kernel import Kernel, timeout_of
from .output import FrameWriter, OutputStream
from .rpc import refuse_blocking


class EmbeddedSession:
    """A kernel driven frame by frame by its host, inside the host's own event loop."""

    def __init__(self, config, write, *, block=refuse_blocking, namespace=None):
        self._write = write
        self.kernel = Kernel(config, self.send, block=block, namespace=namespace)
        limit = self.kernel.config["max_output"]
        self._streams = (OutputStream("stdout", self.send, limit), OutputStream("stderr", self.send, limit))
        self._writers = tuple(FrameWriter(stream) for stream in self._streams)
        sys.stdout, sys.stderr = self._writers

    def send(self, frame):
        """Hands one frame to the host as a JSON line; ValueError when it is over the size cap."""
        self._write(encode(frame).decode("utf-8"))

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
        self.kernel.begin(execution_id)
        started = time.monotonic()
        task = asyncio.ensure_future(self.kernel.run_async(frame.get("code") or ""))
        finished, _ = await asyncio.wait({task}, timeout=timeout)
        if not finished:
            task.cancel()
            await asyncio.wait({task})
        outcome = task.result()
        overran = time.monotonic() - started >= timeout
        for writer in self._writers:
            writer.flush()
        self.kernel.collect_artifacts(execution_id)
        dropped = {stream.name: stream.finish() for stream in self._streams}
        self.send(self.kernel.done_frame(execution_id, outcome, timed_out_after=timeout if overran else None,
                                         dropped=dropped))

