"""Frames over private copies of the process's stdin/stdout, or of a direct channel fd the runtime handed
over (CPython transport)."""
import _signal  # signal.pthread_sigmask wraps its answer in enums on every call; this is the hot path
import os
import signal
import threading

from .frames import decode, encode

_SIGINT = {signal.SIGINT}


class Channel:
    """Owns the protocol fds. send() may be called from any thread; writes never interleave."""

    def __init__(self, read_fd, write_fd, pending=b""):
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._pending = pending
        self._lock = threading.Lock()
        self._main = threading.main_thread().ident

    @classmethod
    def from_stdio(cls, pending=b""):
        """Moves the protocol to private non-inheritable fds and points fd 0 at /dev/null."""
        read_fd, write_fd = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        return cls(read_fd, write_fd, pending)

    @classmethod
    def from_fd(cls, fd):
        """Moves the protocol to a private copy of the duplex socket `fd` (the host's direct channel, which
        skips the engine's stdio relay); fd 0 points at /dev/null and `fd` itself is closed, so child
        processes inherit neither."""
        private = os.dup(fd)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        return cls(private, private)

    def send(self, frame):
        """Writes one frame; raises ValueError for frames over the size cap."""
        data = encode(frame)
        on_main = threading.get_ident() == self._main
        if on_main:
            # A timeout's SIGINT must not land between two partial writes and cut a frame in half;
            # blocked here, it is delivered (and raised) once the frame is out.
            _signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        try:
            with self._lock:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._write_fd, view) :]
        finally:
            if on_main:
                _signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)

    def serve(self, on_frame, on_close):
        """Reads frames on a daemon thread, calling on_frame(frame) for each and on_close() at EOF."""
        thread = threading.Thread(
            target=self._read, args=(on_frame, on_close), name="codemode-frames", daemon=True
        )
        thread.start()
        return thread

    def _read(self, on_frame, on_close):
        buffer = bytearray(self._pending)
        try:
            while True:
                while True:
                    newline = buffer.find(b"\n")
                    if newline < 0:
                        break
                    frame = decode(bytes(buffer[:newline]))
                    del buffer[: newline + 1]
                    if frame is not None:
                        try:
                            on_frame(frame)
                        except Exception:  # one bad frame must not leave every later call unanswered
                            pass
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    break
                buffer += chunk
        except OSError:
            pass
        on_close()
