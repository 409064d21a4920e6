"""fd-level capture of stdout and stderr (CPython transport).

fds 1 and 2 become pipes, so print(), os.write(1, ...) and child processes all land there; a daemon
thread per pipe forwards what arrives as output frames. drain() lets the main thread make sure all of
an execution's output is sent before its done frame.
"""
import os
import select
import sys
import threading

from .frames import OUTPUT_CHUNK_BYTES
from .output import OutputStream

_DRAIN_CHUNKS = 64  # 4 MiB: more than a pipe can hold, so everything written before finish() is read


class Capture:
    """Redirects fds 1 and 2 and accounts their output per execution."""

    def __init__(self, send, limit):
        self._pipes = [
            _Pipe(1, OutputStream("stdout", send, limit)),
            _Pipe(2, OutputStream("stderr", send, limit)),
        ]
        # Fresh text streams over the pipes: line-buffered so output streams as it is printed, and
        # lenient, so no string can fail to print.
        sys.stdout = sys.__stdout__ = _text_stream(1)
        sys.stderr = sys.__stderr__ = _text_stream(2)

    def begin(self, execution_id):
        """Starts an execution: restores fds the user closed or replaced, resets the counters."""
        _reopen_closed_std_fds()
        for pipe in self._pipes:
            pipe.begin(execution_id)

    def sync(self):
        """Flushes Python's buffers and forwards everything already written, mid-execution (before a
        display, so it arrives after the output that came before it)."""
        _flush_python_streams()
        for pipe in self._pipes:
            pipe.drain()

    def finish(self):
        """Flushes Python's buffers, forwards everything already written, returns dropped byte counts."""
        _flush_python_streams()
        return {pipe.stream.name: pipe.finish() for pipe in self._pipes}


class _Pipe:
    def __init__(self, fd, stream):
        self.fd = fd
        self.stream = stream
        self._lock = threading.Lock()
        self._read_fd = None
        self._identity = None
        self._open()

    def begin(self, execution_id):
        with self._lock:
            if _identity(self.fd) != self._identity:
                self._open()
            self.stream.begin(execution_id)

    def drain(self):
        with self._lock:
            if self._read_fd is not None:
                # Bounded, so a background writer can't keep the done frame waiting forever.
                self._read_available(self._read_fd, _DRAIN_CHUNKS)

    def finish(self):
        with self._lock:
            if self._read_fd is not None:
                self._read_available(self._read_fd, _DRAIN_CHUNKS)
            return self.stream.finish()

    def _open(self):
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, self.fd)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._read_fd = read_fd
        self._identity = _identity(self.fd)
        name = f"codemode-{self.stream.name}"
        threading.Thread(target=self._pump, args=(read_fd,), name=name, daemon=True).start()

    def _pump(self, read_fd):
        poller = select.poll()
        poller.register(read_fd, select.POLLIN)
        try:
            while True:
                poller.poll()
                with self._lock:  # one chunk per turn, so finish() never waits long for the lock
                    if not self._read_available(read_fd, 1):
                        break
        except OSError:  # the host went away; the reader thread ends the process
            pass
        with self._lock:
            if self._read_fd == read_fd:
                self._read_fd = None
            os.close(read_fd)

    def _read_available(self, read_fd, max_chunks):
        """Forwards what the pipe holds right now; False once every writer has closed it."""
        for _ in range(max_chunks):
            try:
                chunk = os.read(read_fd, OUTPUT_CHUNK_BYTES)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self.stream.feed(chunk)
        return True


def _flush_python_streams():
    for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}.values():
        try:
            stream.flush()
        except Exception:
            pass


def _reopen_closed_std_fds():
    """Puts /dev/null on any of fds 0-2 the user closed, so a new pipe can't land on one of them."""
    while True:
        closed = [fd for fd in (0, 1, 2) if _identity(fd) is None]
        if not closed:
            return
        null = os.open(os.devnull, os.O_RDWR)
        if null > 2:
            os.dup2(null, closed[0])
            os.close(null)


def _text_stream(fd):
    return open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)


def _identity(fd):
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)
