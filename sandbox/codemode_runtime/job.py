"""A background job and who output belongs to: the context variable `owner` names the Run or Job whose
code is running, and OutputRouter (sys.stdout, sys.stderr) sends what a job writes to the job. See jobs.py.
"""
import asyncio
import contextvars
import io
import threading
import time

owner = contextvars.ContextVar("codemode_owner", default=None)
"""The Run or Job the code running in this context belongs to (None: a thread nobody started as a job)."""

OUTPUT_KEPT = 64 * 1024
"""Characters of output a job keeps (the latest), for job.output."""
TAIL = 2048
"""Characters of output `runtime.jobs()` shows per job."""
SENT_PER_JOB = 1024 * 1024
"""Characters of a job's output sent to the host as it is written; the rest is only kept and counted."""
DISPLAYS_KEPT = 20
DISPLAY_BYTES_KEPT = 8 * 1024 * 1024


class Run:
    """The owner of one run's code: active until the run ends."""

    __slots__ = ("id", "active")

    def __init__(self, run_id):
        self.id = run_id
        self.active = True


class Job:
    """A handle on background work, as `runtime.start_job()` returns it and `runtime.jobs()` lists it."""

    def __init__(self, registry, job_id, name, kind):
        self.id = job_id
        self.name = name
        self.kind = kind
        """"job" (started with start_job) or "task" (a plain asyncio task a run left running)."""
        self.state = "running"
        self.tool_calls = 0
        self.error = None
        self.value = None
        self.exception = None
        self.started = time.monotonic()
        self.ended = None
        self._registry = registry
        self._lock = threading.Lock()
        self._output = []
        self._output_chars = 0
        self._pending = []
        self._sent = 0
        self.dropped = 0
        self._displays = []
        self._display_bytes = 0
        self._cancel_reason = None
        self._task = None
        self._thread = None
        self._future = registry.loop.create_future()

    def __repr__(self):
        return f"<Job {self.id} {self.name!r} {self.state} {self.seconds:.1f}s>"

    def __await__(self):
        return self._registry.wait(self).__await__()

    @property
    def seconds(self):
        """How long it has run (or ran)."""
        return (self.ended or time.monotonic()) - self.started

    @property
    def output(self):
        """What it printed (the latest 64 KiB)."""
        with self._lock:
            return "".join(self._output)[-OUTPUT_KEPT:]

    def done(self):
        """Whether it has finished (done, failed or cancelled)."""
        return self.state != "running"

    def cancel(self, reason=None):
        """Asks the job to stop and returns at once; `await runtime.wait(job)` then raises CancelledError.
        A job running a plain function stops at its next Python instruction (not inside a blocking call)."""
        if self.done():
            return
        self._cancel_reason = self._cancel_reason or reason or "cancelled by job.cancel()"
        self._registry.call_in_loop(self._cancel_now)

    def info(self):
        """The dict `runtime.jobs()` lists."""
        tail = self.output[-TAIL:]
        return {"id": self.id, "name": self.name, "state": self.state, "seconds": round(self.seconds, 3),
                "tool_calls": self.tool_calls, "output_tail": tail, "error": self.error}

    def write(self, stream, text):
        """Keeps output the job wrote and queues it for the host (thread-safe)."""
        with self._lock:
            self._output.append(text)
            self._output_chars += len(text)
            if self._output_chars > 2 * OUTPUT_KEPT:
                kept = "".join(self._output)[-OUTPUT_KEPT:]
                self._output, self._output_chars = [kept], len(kept)
            room = SENT_PER_JOB - self._sent
            if room < len(text):
                self.dropped += len(text) - max(room, 0)
                text = text[: max(room, 0)]
            if not text:
                return
            self._sent += len(text)
            first = not self._pending
            if self._pending and self._pending[-1][0] == stream:
                self._pending[-1][1].append(text)
            else:
                self._pending.append((stream, [text]))
        if first:
            self._registry.output_waiting(self)

    def keep_display(self, rep):
        """Keeps a display the job made, to be shown by the run that waits for it."""
        mime, data, _text = rep
        size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
        with self._lock:
            kept = len(self._displays) < DISPLAYS_KEPT and self._display_bytes + size <= DISPLAY_BYTES_KEPT
            if kept:
                self._displays.append(rep)
                self._display_bytes += size
        note = "shown by `await runtime.wait(job)`" if kept else "dropped: over the job's display cap"
        self.write("stdout", f"[display {mime}, {size} bytes: {note}]\n")

    def take_displays(self):
        """The kept displays, once."""
        with self._lock:
            displays, self._displays, self._display_bytes = self._displays, [], 0
        return displays

    def take_output(self):
        """Output queued for the host: [(stream, text)]."""
        with self._lock:
            pending, self._pending = self._pending, []
        return [(stream, "".join(parts)) for stream, parts in pending]

    def _cancel_now(self):
        if self.done():
            return
        if self._task is not None:
            self._task.cancel(self._cancel_reason)
        thread = self._thread
        if thread is not None and thread.ident is not None:
            _raise_in_thread(thread, asyncio.CancelledError)

    def _finish(self, state, value=None, exception=None, error=None):
        if self.done():
            return
        self.state = state
        self.value = value
        self.exception = exception
        self.error = error
        self.ended = time.monotonic()
        if not self._future.done():
            self._future.set_result(None)
        self._registry.ended(self)


class OutputRouter(io.TextIOBase):
    """sys.stdout / sys.stderr: what a job writes goes to the job, everything else to `inner` (the run's
    stream, as before)."""

    def __init__(self, registry, name, inner):
        super().__init__()
        self._registry = registry
        self.name = name
        self.inner = inner

    def write(self, text):
        job = self._registry.job_here()
        if job is None:
            return self.inner.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        job.write(self.name, text)
        return len(text)

    def flush(self):
        self.inner.flush()

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self.inner.fileno()

    @property
    def encoding(self):
        return self.inner.encoding

    @property
    def errors(self):
        return self.inner.errors

    def __getattr__(self, name):  # buffer, line_buffering, ...: the inner stream's
        return getattr(self.inner, name)


def _raise_in_thread(thread, exc_type):
    """Raises `exc_type` in a thread at its next Python instruction (CPython only)."""
    try:
        import ctypes

        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type))
    except Exception:  # no ctypes: the thread finishes on its own; the job already counts as cancelled
        pass
