"""Frames over private copies of the process's stdin/stdout, or of a direct channel fd the runtime handed
over (CPython transport).

Who reads: the session's event loop reads the channel itself once attached (`attach`), so an answer
reaches the awaiting task without a second thread waking the loop; before that a daemon thread does. The
thread also reads while any thread blocks in a synchronous call (`block` lends it the channel), and
`stall_check()`, which the watchdog calls every 10 ms while a run is armed, steps in when the loop stops
reading (CPU-bound user code) while frames wait, so an interrupt still lands. Otherwise the thread sleeps
until it is needed: an idle sandbox costs no CPU. Reads never block and happen under one lock, so
whichever side reads, frames are split and dispatched in order.
"""
import _signal  # signal.pthread_sigmask wraps its answer in enums on every call; this is the hot path
import os
import select
import signal
import socket
import threading

from .frames import decode, encode

_SIGINT = {signal.SIGINT}
_ATOMIC_WRITE = 4096
"""Frames up to this size go out in one write that a signal cannot split (PIPE_BUF, one socket skb)."""
_READ_BYTES = 1 << 20
"""Most bytes one read takes from the channel."""
STALL_CHECK = 0.01
"""Seconds between checks that an attached loop still reads what arrives, while a run is armed."""


class Channel:
    """Owns the protocol fds. send() may be called from any thread; writes never interleave."""

    def __init__(self, read_fd, write_fd, pending=b"", sock=None):
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._buffer = bytearray(pending)
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._main = threading.main_thread().ident
        # Writes block, so only reads may not: per call on a socket, by fd flag on a private pipe end.
        # Reads land in one reused buffer: recv(1 MiB) would mmap and unmap a fresh 1 MiB per frame.
        self._chunk = memoryview(bytearray(_READ_BYTES))
        if sock is not None:
            self._recv = lambda: sock.recv_into(self._chunk, 0, socket.MSG_DONTWAIT)
        else:
            os.set_blocking(read_fd, False)
            self._recv = lambda: os.readv(read_fd, [self._chunk])
        self._sock = sock
        self._wake_r, self._wake_w = os.pipe()
        self._loop = None
        """The event loop reading the channel, while one is attached."""
        self._loop_thread = None
        self._lent = 0
        """How many blocking calls on the loop's thread wait for the reader thread to read for them."""
        self._lent_lock = threading.Lock()
        self._loop_reads = 0
        self._seen_reads = -1
        self._on_frame = None
        self._on_close = None
        self._forked = False

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
        return cls(private, private, sock=socket.socket(fileno=private))

    def send(self, frame):
        """Writes one frame; raises ValueError for frames over the size cap. A fork()ed child sends nothing."""
        if self._forked:
            return
        data = encode(frame)
        # A timeout's SIGINT must not land between two partial writes and cut a frame in half; blocked
        # here, it is delivered (and raised) once the frame is out. A small frame is one atomic write.
        guard = len(data) > _ATOMIC_WRITE and threading.get_ident() == self._main
        if guard:
            _signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        try:
            with self._lock:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._write_fd, view) :]
        finally:
            if guard:
                _signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)

    def serve(self, on_frame, on_close):
        """Starts the reader thread, calling on_frame(frame) for each frame and on_close() at EOF."""
        self._on_frame = on_frame
        self._on_close = on_close
        thread = threading.Thread(target=self._read_thread, name="codemode-frames", daemon=True)
        thread.start()
        return thread

    def attach(self, loop):
        """Lets `loop` (to run on this thread) read the channel until detach()."""
        self._loop_thread = threading.get_ident()
        self._loop = loop
        loop.add_reader(self._read_fd, self._pump_in_loop)
        self._wake()  # so the thread stops watching the fd and racing the loop for frames

    def detach(self, loop):
        """Hands reading back to the thread."""
        try:
            loop.remove_reader(self._read_fd)
        except Exception:  # user code closed the loop; it reads nothing any more either way
            pass
        self._loop = None
        self._wake()

    def forked(self):
        """In a fork()ed child: stop reading and sending (the channel belongs to the parent). The loop's
        selector is left alone: the child shares its epoll instance with the parent, so unregistering the
        channel there would unregister it for the parent too."""
        self._forked = True

    def block(self, event):
        """How a synchronous call waits: the reader thread reads for it meanwhile (the loop may be the one
        blocked, or busy with code that does not await)."""
        if self._loop is None:
            event.wait()
            return
        with self._lent_lock:
            self._lent += 1
        self._wake()
        try:
            event.wait()
        finally:
            with self._lent_lock:
                self._lent -= 1

    def stall_check(self):
        """Reads what waits when the attached loop read nothing since the last check (it runs code that does
        not await); cheap when it did. Called from the watchdog's thread while a run is armed."""
        if self._loop is None or self._forked:
            return
        reads = self._loop_reads
        if reads == self._seen_reads and select.select([self._read_fd], [], [], 0)[0]:
            self._pump()
        self._seen_reads = reads

    def _wake(self):
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def _pump_in_loop(self):
        self._loop_reads += 1
        # A timeout's SIGINT raised in the middle would drop frames already taken from the buffer.
        _signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        try:
            self._pump()
        finally:
            _signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)

    def _read_thread(self):
        with self._read_lock:  # frames that came with the bootstrap
            self._dispatch()
        os.set_blocking(self._wake_w, False)
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        watching = False
        while True:
            # Reading while no loop is attached, or while a blocked call waits for an answer; else asleep.
            reading = self._loop is None or self._lent > 0
            if reading != watching:
                if reading:
                    poller.register(self._read_fd, select.POLLIN)
                else:
                    poller.unregister(self._read_fd)
                watching = reading
            events = poller.poll()
            if any(fd == self._wake_r for fd, _ in events):
                os.read(self._wake_r, 4096)
            if reading and any(fd == self._read_fd for fd, _ in events):
                self._pump()

    def _pump(self):
        """Reads what has arrived and dispatches every complete frame; callable from any thread."""
        if self._forked:
            return
        with self._read_lock:
            try:
                size = self._recv()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                size = 0
            if not size:
                self._on_close()
                return
            self._buffer += self._chunk[:size]
            self._dispatch()

    def _dispatch(self):
        """Hands every complete frame in the buffer to on_frame, in order (the read lock is held)."""
        buffer = self._buffer
        start = 0
        while True:
            newline = buffer.find(b"\n", start)
            if newline < 0:
                break
            frame = decode(bytes(buffer[start:newline]))
            start = newline + 1
            if frame is not None:
                try:
                    self._on_frame(frame)
                except Exception:  # one bad frame must not leave every later call unanswered
                    pass
        del buffer[:start]
