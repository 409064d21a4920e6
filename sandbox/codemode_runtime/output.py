"""User output as `output` frames: chunked, UTF-8 decoded leniently, capped per execution."""
import codecs
import io

from .frames import OUTPUT_CHUNK_BYTES


class OutputStream:
    """Forwards one stream (stdout or stderr) as output frames, up to `limit` bytes per execution.

    Not thread-safe: the caller serialises feed/begin/finish for one stream.
    """

    def __init__(self, name, send, limit):
        self.name = name
        self.limit = limit
        self._send = send
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._id = None
        self.sent = 0
        self.dropped = 0

    def begin(self, execution_id):
        """Starts counting for a new execution; its frames carry `execution_id`."""
        self._id = execution_id
        self.sent = 0
        self.dropped = 0

    def feed(self, data):
        """Forwards raw bytes; anything past the cap is only counted."""
        room = self.limit - self.sent
        if len(data) > room:
            self.dropped += len(data) - max(room, 0)
            data = data[: max(room, 0)]
        for start in range(0, len(data), OUTPUT_CHUNK_BYTES):
            chunk = data[start : start + OUTPUT_CHUNK_BYTES]
            self.sent += len(chunk)
            self._emit(self._decoder.decode(chunk))

    def finish(self):
        """Flushes a dangling partial character and returns the bytes dropped in this execution."""
        self._emit(self._decoder.decode(b"", final=True))
        self._decoder.reset()
        dropped = self.dropped
        self._id = None
        self.sent = 0
        self.dropped = 0
        return dropped

    def _emit(self, text):
        if not text:
            return
        frame = {"type": "output", "stream": self.name, "data": text}
        if self._id is not None:
            frame["id"] = self._id
        self._send(frame)


class FrameWriter(io.TextIOBase):
    """A line-buffered text file that feeds an OutputStream: the stand-in for sys.stdout/stderr where
    fds can't be redirected (Pyodide). flush() before OutputStream.finish()."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream
        self._pending = []

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "backslashreplace"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._pending.append(text)
        if "\n" in text or len(self._pending) > 256:
            self.flush()
        return len(text)

    def flush(self):
        if self._pending:
            text, self._pending = "".join(self._pending), []
            self._stream.feed(text.encode("utf-8", "backslashreplace"))
