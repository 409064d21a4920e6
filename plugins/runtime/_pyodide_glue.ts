/**
 * The Python side of the Pyodide transport. It builds on the sandbox's own in-process seam
 * (`codemode_runtime.embedded.EmbeddedSession`, see sandbox/README.md) and adds what the worker around it
 * makes possible: blocking RPCs answered through the shared-memory mailbox, a `time.sleep` that a timeout
 * interrupts, and capture of what is written to fds 1 and 2. It runs in the Pyodide worker (see
 * pyodide_host.ts), which hands it `host`: `send(line)`, `receive(ms) -> line | None`,
 * `wait(ms) -> interrupted`, `interrupted()`, `drain(stream) -> {bytes, dropped} | None`.
 * @module
 */

/** Python source of the transport; its `start(bootstrap_line, bootstrap_source, host)` returns it. */
export const PYODIDE_GLUE = String.raw`
import asyncio
import codecs
import errno
import importlib
import io
import json
import os
import sys
import time


# What a session imports at its start: a snapshot made with preload() has them imported already.
PRELOAD = ("codemode_runtime.embedded", "codemode_runtime.rpc", "mcp._proxy", "mcp._skills", "mcp.servers")
_preloaded = {}  # the modules preload() installed, by name


def preload(bootstrap_line, bootstrap_source):
    """At snapshot time: installs the runtime from a bootstrap frame and imports what a session needs."""
    global _preloaded
    frame = _bootstrap_frame(bootstrap_line)
    _install(frame, bootstrap_source)
    for name in PRELOAD:
        importlib.import_module(name)
    _preloaded = frame["modules"]


def preloaded_ok():
    """Whether this interpreter has the preloaded runtime (the snapshot check after a restore)."""
    return bool(_preloaded) and all(name in sys.modules for name in PRELOAD)


def start(bootstrap_line, bootstrap_source, host):
    """Installs the runtime modules from the bootstrap frame, as the container's bootstrap does."""
    global _preloaded
    frame = _bootstrap_frame(bootstrap_line)
    if frame["modules"] != _preloaded:
        # Another version of the runtime than the snapshot's: its modules go, the frame's are installed.
        for name in _preloaded:
            sys.modules.pop(name, None)
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "modules", None) is not _preloaded]
        _preloaded = {}
        _install(frame, bootstrap_source)
    # Every sandbox restored from one snapshot would otherwise draw the same "random" numbers.
    if "random" in sys.modules:
        sys.modules["random"].seed()
    return Transport(frame.get("config") or {}, host)


def _bootstrap_frame(line):
    frame = json.loads(line)
    if not isinstance(frame, dict) or "modules" not in frame:
        raise ValueError("The first frame must be the bootstrap frame")
    return frame


def _install(frame, bootstrap_source):
    namespace = {"__name__": "codemode_bootstrap"}
    exec(compile(bootstrap_source, "<codemode>/bootstrap.py", "exec", dont_inherit=True), namespace)
    namespace["install"](frame["modules"], frame.get("packages") or [])


class Transport:
    """Feeds host lines to an EmbeddedSession, one execution at a time."""

    def __init__(self, config, host):
        from codemode_runtime.embedded import EmbeddedSession

        self.host = host
        # The mailbox lets a blocking call take its answer while Python waits: _sync helpers, dir(), help().
        self.session = EmbeddedSession(config, host.send, block=self.block)
        routers = (sys.stdout, sys.stderr)  # a job's output goes to the job, the rest to the writers below
        self.writers = (_Writer(routers[0].inner, host, "stdout"), _Writer(routers[1].inner, host, "stderr"))
        routers[0].inner, routers[1].inner = self.writers
        self.streams = routers
        run_async = self.session.kernel.run_async

        async def run_cell(code):
            sys.stdout, sys.stderr = self.streams  # even if the last cell replaced them
            try:
                return await run_async(code)
            finally:
                for writer in self.writers:
                    writer.drain()

        self.session.kernel.run_async = run_cell
        self.inbox = []
        self.running = False
        time.sleep = self.sleep  # Pyodide's own can't be interrupted at a timeout
        os.system = _no_processes  # Pyodide's reaches for a JS subprocess API and dies on the denial

    def announce(self):
        """Tells the host the runtime is ready."""
        self.session.send(self.session.ready_frame())

    def on_line(self, line):
        """Takes one line from the host; execute frames queue up, the rest is handled at once."""
        frame = json.loads(line)
        if not isinstance(frame, dict):
            return
        if frame.get("type") == "execute":
            self.inbox.append(frame)
            if not self.running:
                self.running = True
                asyncio.get_event_loop().create_task(self._drain())
        else:
            self.session.kernel.handle(frame)

    def block(self, event):
        """How a synchronous RPC waits: takes frames from the host until its answer has arrived."""
        while not event.is_set():
            line = self.host.receive(250)
            if line is not None:
                self.on_line(line)
            elif self.host.interrupted():
                raise KeyboardInterrupt

    def sleep(self, seconds):
        """time.sleep that a timeout can interrupt."""
        seconds = float(seconds)
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.host.wait(min(left, 1.0) * 1000):
                raise KeyboardInterrupt

    async def _drain(self):
        try:
            while self.inbox:
                frame = self.inbox.pop(0)
                try:
                    await self.session.execute(frame)
                except BaseException as exc:  # interrupted outside user code, e.g. formatting a huge traceback
                    self._answer(frame, exc)
        finally:
            self.running = False

    def _answer(self, frame, exc):
        from codemode_runtime.executor import Outcome
        from codemode_runtime.kernel import timeout_of

        outcome = Outcome("error", error=f"{type(exc).__name__}\n", exception=exc)
        timed_out = timeout_of(frame) if isinstance(exc, KeyboardInterrupt) else None
        self.session.kernel.end_run(outcome)
        self.session.send(self.session.kernel.done_frame(frame.get("id"), outcome, timed_out_after=timed_out))


def _no_processes(*args, **kwargs):
    raise OSError(errno.ENOSYS, "The Pyodide sandbox has no processes (os.system, subprocess)")


class _Writer(io.TextIOBase):
    """sys.stdout/sys.stderr: what was written to the fd first (os.write, sys.__stdout__), then the text."""

    def __init__(self, inner, host, name):
        super().__init__()
        self._inner, self._host, self._name = inner, host, name
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    encoding = property(lambda self: self._inner.encoding)
    errors = property(lambda self: self._inner.errors)

    def writable(self):
        return True

    def isatty(self):
        return False

    def drain(self):
        """Moves output written to the fd since the last call into the stream."""
        pending = self._host.drain(self._name)
        if pending is not None:
            text = self._decoder.decode(pending.bytes.to_bytes())
            if pending.dropped:
                text += f"\n[{pending.dropped} bytes written to the {self._name} fd were dropped]\n"
            self._inner.write(text)

    def write(self, text):
        self.drain()
        return self._inner.write(text)

    def flush(self):
        self.drain()
        self._inner.flush()
`;
