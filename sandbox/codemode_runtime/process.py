"""The CPython sandbox process: what the bootstrap runs as `main(config, rest)`.

The main thread runs the session's event loop for good. Every run is a task on it, so a cell's top-level
code runs inside the running loop (as in Jupyter), and jobs and tasks a run left running go on between
runs. Runs never overlap: execute frames wait their turn. The loop reads frames itself; the reader thread
reads while a thread blocks in a synchronous call, and while a run is armed the watchdog steps in when
the loop stops reading (code that computes without awaiting) while frames wait, so an interrupt still
lands. Between runs nothing but the loop waits for frames, so an idle sandbox costs no CPU.

Threads: main (the loop), frame reader, one pump per captured stream, watchdog, and one per job that runs
a plain function.
"""
import asyncio
import collections
import os
import sys

from .capture import Capture
from .channel import STALL_CHECK, Channel
from .executor import Outcome
from .kernel import Kernel, timeout_of
from .watchdog import Watchdog


class _Run:
    """One execute frame on its way to its done frame."""

    __slots__ = ("id", "code", "timeout", "task", "finished")

    def __init__(self, frame):
        self.id = frame.get("id")
        self.code = frame.get("code") or ""
        self.timeout = timeout_of(frame)
        self.task = None
        self.finished = False


class Process:
    """Wires the kernel to fds, threads and signals."""

    def __init__(self, config, rest=b""):
        channel_fd = config.get("channel_fd")
        self.channel = Channel.from_fd(channel_fd) if channel_fd is not None else Channel.from_stdio(rest)
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.kernel = Kernel(config, self.channel.send, block=self.channel.block, loop=self.loop)
        self.capture = Capture(self.channel.send, self.kernel.config["max_output"])
        sys.stdout, sys.stderr = self.kernel.routers(sys.stdout, sys.stderr)
        self.kernel.sync_output = self.capture.sync
        self.watchdog = Watchdog(self.loop, stall_check=self.channel.stall_check, every=STALL_CHECK)
        self.kernel.clock = self
        self.waiting = collections.deque()
        self.pid = os.getpid()
        self.run = None
        """The run executing, if any."""
        self.current = None
        """The id of the execution being run, so a late interrupt can't hit the next one."""
        self.interrupted = None
        """The id the host last asked to interrupt; it may arrive before its execution starts."""
        os.register_at_fork(after_in_child=self._forked)

    def serve(self):
        """Announces readiness, then runs the loop until shutdown or EOF."""
        self.channel.send({"type": "ready", "python": sys.version.split()[0]})
        self.channel.serve(self._on_frame, self._on_close)
        self.channel.attach(self.loop)
        while True:
            try:
                self.loop.run_forever()
            except (KeyboardInterrupt, SystemExit):
                self._escaped()
            if os.getpid() != self.pid:  # a fork()ed child got back here: it must not answer the host
                os._exit(0)

    def _on_frame(self, frame):
        """Takes a frame from whichever side read it (the loop, or the reader thread)."""
        kind = frame.get("type")
        if kind == "execute":
            self.kernel.call_in_loop(self._enqueue, frame)
        elif kind == "interrupt":
            self.interrupted = frame.get("id")
            if self.interrupted == self.current:
                self.watchdog.interrupt()
        elif kind == "shutdown":
            self._on_close()
        elif kind == "cancel_job":
            self.kernel.call_in_loop(self.kernel.handle, frame)
        else:
            self.kernel.handle(frame)

    def _enqueue(self, frame):
        self.waiting.append(frame)
        self._start_next()

    def _start_next(self):
        if self.run is not None or not self.waiting:
            return
        run = self.run = _Run(self.waiting.popleft())
        self.current = run.id
        self.capture.begin(run.id)
        context = self.kernel.begin(run.id)
        asyncio.set_event_loop(self.loop)  # user code may have run asyncio.run() in a thread, or unset it
        run.task = self.loop.create_task(self._execute(run), context=context)

    async def _execute(self, run):
        """Runs one execute frame and sends its done frame after all of its output."""
        try:
            try:
                self.watchdog.arm(run.timeout)
                self.watchdog.task = run.task
                if self.interrupted == run.id:
                    self.watchdog.interrupt()
                outcome = await self.kernel.run_async(run.code)
            finally:
                self.watchdog.disarm()
        except (KeyboardInterrupt, asyncio.CancelledError) as exc:  # landed just after the user's code returned
            outcome = Outcome("error", error=f"{type(exc).__name__}\n", exception=exc)
            self.kernel.end_run(outcome)
        self._finish(run, outcome)

    def _finish(self, run, outcome):
        if run.finished:
            return
        run.finished = True
        if os.getpid() != self.pid:  # a fork()ed child got back here: it must not answer the host
            os._exit(0)
        self.kernel.collect_artifacts(run.id)
        dropped = self.capture.finish()
        timed_out = run.timeout if self.watchdog.fired else None
        self.channel.send(self.kernel.done_frame(run.id, outcome, timed_out_after=timed_out, dropped=dropped))
        if self.run is run:
            self.run = self.current = None
        if self.waiting:
            self.loop.call_soon(self._start_next)

    def _escaped(self):
        """A KeyboardInterrupt or SystemExit left the loop: a plain task raised it, or a timeout's SIGINT
        landed between callbacks (the run's task was cancelled and keeps going, or another task was
        computing). A run past its deadline ends now, as timed out; its task is cancelled again and left to
        end on its own."""
        run = self.run
        if run is None or run.finished or not self.watchdog.fired:
            return
        self.watchdog.disarm()
        outcome = Outcome("error", error="KeyboardInterrupt\n", exception=KeyboardInterrupt())
        self.kernel.end_run(outcome)
        run.task.cancel()
        self._finish(run, outcome)

    def pause(self, execution_id):
        """The host waits for a person: the current execution's clock stops."""
        if execution_id == self.current:
            self.watchdog.pause()

    def resume(self, execution_id):
        """The wait is over: the clock runs again."""
        if execution_id == self.current:
            self.watchdog.resume()

    def _forked(self):
        # In a fork()ed child: it must neither read the host's frames nor send any, and its copy of the
        # loop stops at once, so the child ends (see serve) instead of running the session a second time.
        self.channel.forked()
        try:
            self.loop.stop()
        except Exception:
            pass

    def _on_close(self):
        # The host is gone or asked us to stop: nothing left to report to, so leave at once, even
        # mid-execution and with user threads still running.
        os._exit(0)


def main(config, rest=b""):
    """Entry point called by the bootstrap."""
    Process(config, rest).serve()
