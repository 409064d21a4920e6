/**
 * The Python side of the Pyodide transport: what `codemode_runtime/process.py` is for CPython, built on the
 * same transport-free kernel. It runs inside the Pyodide worker (see pyodide_host.ts), which hands it a
 * `host` object: `send(line)`, `receive(ms) -> line | None`, `wait(ms) -> interrupted`, `interrupted()`.
 * @module
 */

/** Python source of the transport; its `start(bootstrap_line, bootstrap_source, host)` returns it. */
export const PYODIDE_GLUE = String.raw`
import asyncio
import json
import sys
import time

DEFAULT_TIMEOUT = 30.0


def start(bootstrap_line, bootstrap_source, host):
    """Installs the runtime modules from the bootstrap frame and returns the transport."""
    frame = json.loads(bootstrap_line)
    if frame.get("type") not in (None, "bootstrap") or "modules" not in frame:
        raise ValueError("The first frame must be the bootstrap frame")
    namespace = {"__name__": "codemode_bootstrap"}
    exec(compile(bootstrap_source, "<codemode>/bootstrap.py", "exec", dont_inherit=True), namespace)
    namespace["install"](frame["modules"], frame.get("packages") or [])
    return Transport(frame.get("config") or {}, host)


class Transport:
    """Frames in through on_line, frames out through host.send; one execution at a time."""

    def __init__(self, config, host):
        from codemode_runtime.frames import decode, encode
        from codemode_runtime.kernel import Kernel
        from codemode_runtime.output import FrameWriter, OutputStream

        self.host = host
        self._encode, self._decode = encode, decode
        self.kernel = Kernel(config, self.send, block=self.block)
        limit = self.kernel.config["max_output"]
        self.streams = {name: OutputStream(name, self.send, limit) for name in ("stdout", "stderr")}
        transport = self

        class Writer(FrameWriter):
            """sys.stdout/sys.stderr: what fds 1 and 2 got first, so the order is kept."""

            def __init__(self, name):
                super().__init__(transport.streams[name])
                self._name = name

            def write(self, text):
                transport.drain(self._name)
                return super().write(text)

        self.writers = {name: Writer(name) for name in self.streams}
        self.inbox = []
        self.running = False
        time.sleep = self.sleep  # the built-in one can't be interrupted at a timeout

    def announce(self):
        """Tells the host the runtime is ready."""
        self.send({"type": "ready", "python": sys.version.split()[0]})

    def send(self, frame):
        """Encodes a frame (raising ValueError over the size cap) and hands it to the host."""
        self.host.send(self._encode(frame)[:-1].decode("utf-8"))

    def on_line(self, line):
        """Takes one line from the host."""
        frame = self._decode(line)
        if frame is None or self.kernel.handle(frame):
            return
        if frame.get("type") == "execute":
            self.inbox.append(frame)
            if not self.running:
                self.running = True
                asyncio.get_event_loop().create_task(self._drain())

    def drain(self, name):
        """Moves output written to fd 1 or 2 (os.write, sys.__stdout__) into the captured stream."""
        pending = self.host.drain(name)
        if pending is not None:
            stream = self.streams[name]
            stream.feed(pending.bytes.to_bytes())
            stream.dropped += pending.dropped

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
                await self._execute(self.inbox.pop(0))
        finally:
            self.running = False

    async def _execute(self, frame):
        from codemode_runtime.executor import Outcome

        execution_id = frame.get("id")
        timeout = _seconds(frame.get("timeout"))
        for stream in self.streams.values():
            stream.begin(execution_id)
        sys.stdout, sys.stderr = self.writers["stdout"], self.writers["stderr"]
        loop = asyncio.get_event_loop()
        task = loop.create_task(self.kernel.run_async(frame.get("code") or ""))
        expired = []
        # Stops runs that are waiting; the host's main thread interrupts runs that are computing.
        timer = loop.call_later(timeout, lambda: (expired.append(True), task.cancel()))
        started = time.monotonic()
        try:
            outcome = await task
        except BaseException as exc:  # cancelled before user code ran, or interrupted in between
            outcome = Outcome("error", error=f"{type(exc).__name__}\n", exception=exc)
        finally:
            timer.cancel()
        interrupted = isinstance(outcome.exception, (KeyboardInterrupt, asyncio.CancelledError))
        timed_out = bool(expired) or (interrupted and time.monotonic() - started >= timeout)
        for name in self.streams:
            self.drain(name)
        dropped = {name: stream.finish() for name, stream in self.streams.items()}
        done = self.kernel.done_frame(execution_id, outcome, timed_out_after=timeout if timed_out else None,
                                      dropped=dropped)
        self.send(done)


def _seconds(value):
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return DEFAULT_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_TIMEOUT
`;
