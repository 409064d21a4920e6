"""Per-execution timeout for the CPython transport.

When an execution overruns, the watchdog thread cancels the running asyncio task (if any) and sends
SIGINT to the main thread, so blocking sleeps and reads break too; it repeats SIGINT every second
until the execution ends. The SIGINT handler raises KeyboardInterrupt only while an overrun execution
is armed, so a late signal can never hit the runtime between executions.

While the host waits for a person (an approval question), it sends `pause` and later `resume`: the clock
stops in between and restarts with the time that was left. The host keeps its own deadline and pauses it
the same way, so stopping this clock from inside gains sandbox code nothing.

While armed, the thread also calls `stall_check()` every STALL_CHECK seconds (the channel's: it reads
frames the event loop leaves waiting while user code computes), so a host's cancel reaches such code;
disarmed, the thread sleeps until the next run.
"""
import signal
import threading
import time

_CANCEL_GRACE = 0.1  # seconds a cancelled task gets before SIGINT follows
_REPEAT = 1.0


class Watchdog:
    """Arms a deadline around each execution; must be created on the main thread."""

    def __init__(self, loop, stall_check=None, every=0.01):
        self.loop = loop
        self._stall_check = stall_check
        self._every = every
        """The event loop whose task gets cancelled; replaceable if user code closed the old one."""
        self._main = threading.main_thread().ident
        self._cond = threading.Condition()
        self._armed = False
        self._fired = False
        self._next = None
        self._left = None  # seconds left when paused, else None
        self._sleeping_until = None
        self.task = None
        """The asyncio task of the current execution, set by whoever drives it."""
        signal.signal(signal.SIGINT, self._on_sigint)
        threading.Thread(target=self._watch, name="codemode-watchdog", daemon=True).start()

    def arm(self, seconds):
        """Starts the clock for one execution."""
        if signal.getsignal(signal.SIGINT) != self._on_sigint:  # user code replaced it
            signal.signal(signal.SIGINT, self._on_sigint)
        with self._cond:
            self._fired = False
            self.task = None
            self._left = None
            self._next = time.monotonic() + seconds
            self._armed = True
            # Waking the thread costs the main thread a GIL hand-off, so only when it would otherwise
            # sleep past the new deadline; usually it sleeps until an earlier one and re-checks then.
            if self._sleeping_until is None or self._next < self._sleeping_until:
                self._cond.notify()

    def interrupt(self):
        """Ends the armed execution now, as if its deadline had passed (the host's cancel)."""
        with self._cond:
            if self._armed:
                self._left = None
                self._next = time.monotonic()
                self._cond.notify()

    def pause(self):
        """Stops the clock of the armed execution (the host is waiting for a person)."""
        with self._cond:
            if self._armed and not self._fired and self._left is None:
                self._left = max(0.0, self._next - time.monotonic())

    def resume(self):
        """Restarts a paused clock with the time that was left."""
        with self._cond:
            if self._left is not None:
                self._next = time.monotonic() + self._left
                self._left = None
                self._cond.notify()

    def disarm(self):
        """Stops the clock; returns True when the deadline passed and the execution was interrupted."""
        self._armed = False  # first, so a signal handled from here on is ignored; the thread notices later
        return self._fired

    @property
    def fired(self):
        """Whether the current (or last) execution ran past its deadline."""
        return self._fired

    def _on_sigint(self, signum, frame):
        if self._armed and self._fired:
            raise KeyboardInterrupt

    def _watch(self):
        with self._cond:
            while True:
                if not self._armed:
                    self._sleeping_until = None
                    self._cond.wait()
                    continue
                if self._stall_check is not None:
                    # Armed, paused or not: the loop may be computing while frames (a cancel, the resume
                    # of a pause) wait for it, so look every `_every` seconds until the deadline.
                    delay = self._next - time.monotonic() if self._left is None else self._every
                    if delay > 0:
                        self._sleeping_until = min(self._next, time.monotonic() + self._every)
                        self._cond.wait(min(delay, self._every))
                        if self._armed:
                            # Outside the lock: the check dispatches frames under the channel's read lock,
                            # and the loop, holding that lock, may be dispatching a pause that needs ours.
                            self._cond.release()
                            try:
                                self._stall_check()
                            finally:
                                self._cond.acquire()
                        continue
                elif self._left is not None:
                    self._sleeping_until = None
                    self._cond.wait()
                    continue
                delay = self._next - time.monotonic()
                if delay > 0:
                    self._sleeping_until = self._next
                    self._cond.wait(delay)
                    continue
                task = self.task
                if not self._fired and task is not None and not task.done():
                    self._fired = True
                    try:
                        self.loop.call_soon_threadsafe(task.cancel)
                    except RuntimeError:  # loop closed by user code; SIGINT still follows
                        pass
                    self._next = time.monotonic() + _CANCEL_GRACE
                    continue
                self._fired = True
                signal.pthread_kill(self._main, signal.SIGINT)
                self._next = time.monotonic() + _REPEAT
