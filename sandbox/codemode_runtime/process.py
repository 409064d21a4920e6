"""The CPython sandbox process: what the bootstrap runs as `main(config, rest)`.

Threads: main (runs user code, one execution at a time; while an async cell runs, its event loop reads
frames), frame reader (reads frames otherwise: rpc_result settles waiters, execute is queued for main,
shutdown/EOF exits), one pump per captured stream, watchdog.
"""
import asyncio
import os
import queue
import sys

from .capture import Capture
from .channel import Channel
from .executor import Outcome
from .kernel import Kernel, timeout_of
from .watchdog import Watchdog


class Process:
    """Wires the kernel to fds, threads and signals."""

    def __init__(self, config, rest=b""):
        channel_fd = config.get("channel_fd")
        self.channel = Channel.from_fd(channel_fd) if channel_fd is not None else Channel.from_stdio(rest)
        self.kernel = Kernel(config, self.channel.send, block=self.channel.block)
        self.capture = Capture(self.channel.send, self.kernel.config["max_output"])
        self.kernel.sync_output = self.capture.sync
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.watchdog = Watchdog(self.loop)
        self.kernel.clock = self
        self.inbox = queue.SimpleQueue()
        self.pid = os.getpid()
        self.current = None
        """The id of the execution being run, so a late interrupt can't hit the next one."""
        self.interrupted = None
        """The id the host last asked to interrupt; it may arrive before its execution starts."""

    def serve(self):
        """Announces readiness, then runs executions until shutdown or EOF."""
        self.channel.send({"type": "ready", "python": sys.version.split()[0]})
        self.channel.serve(self._on_frame, self._on_close)
        while True:
            self.execute(self.inbox.get())

    def execute(self, frame):
        """Runs one execute frame and sends its done frame after all of its output."""
        execution_id = self.current = frame.get("id")
        timeout = timeout_of(frame)
        self.capture.begin(execution_id)
        self.kernel.begin(execution_id)
        if self.loop.is_closed():  # user code closed it; a session needs one
            self.loop = self.watchdog.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)  # user code may have run asyncio.run(), which unsets it
        try:
            try:
                self.watchdog.arm(timeout)
                if self.interrupted == execution_id:
                    self.watchdog.interrupt()
                outcome = self.kernel.run(frame.get("code") or "", self._drive)
            finally:
                self.watchdog.disarm()
        except KeyboardInterrupt as exc:  # the interrupt landed just after the user's code returned
            outcome = Outcome("error", error="KeyboardInterrupt\n", exception=exc)
        if os.getpid() != self.pid:  # a fork()ed child got back here: it must not answer the host
            os._exit(0)
        self.kernel.collect_artifacts(execution_id)
        dropped = self.capture.finish()
        timed_out = timeout if self.watchdog.fired else None
        done = self.kernel.done_frame(execution_id, outcome, timed_out_after=timed_out, dropped=dropped)
        self.channel.send(done)

    def _drive(self, coroutine):
        task = self.loop.create_task(coroutine)
        self.watchdog.task = task
        self.channel.attach(self.loop)
        try:
            return self.loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                task.cancel()
                try:
                    self.loop.run_until_complete(asyncio.wait([task], timeout=1.0))
                except BaseException:
                    pass
            if task.done() and not task.cancelled():
                task.exception()  # retrieved, so asyncio doesn't log it again
            raise
        finally:
            self.channel.detach(self.loop)
            self.watchdog.task = None

    def _on_frame(self, frame):
        kind = frame.get("type")
        if kind == "execute":
            self.inbox.put(frame)
        elif kind == "interrupt":
            self.interrupted = frame.get("id")
            if self.interrupted == self.current:
                self.watchdog.interrupt()
        elif kind == "shutdown":
            self._on_close()
        else:
            self.kernel.handle(frame)

    def pause(self, execution_id):
        """The host waits for a person: the current execution's clock stops."""
        if execution_id == self.current:
            self.watchdog.pause()

    def resume(self, execution_id):
        """The wait is over: the clock runs again."""
        if execution_id == self.current:
            self.watchdog.resume()

    def _on_close(self):
        # The host is gone or asked us to stop: nothing left to report to, so leave at once, even
        # mid-execution and with user threads still running.
        os._exit(0)


def main(config, rest=b""):
    """Entry point called by the bootstrap."""
    Process(config, rest).serve()

