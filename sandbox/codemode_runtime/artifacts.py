"""Artifacts: files a run leaves in the artifacts folder (/workspace/artifacts), or saves with
`runtime.save_artifact(name, data)`, sent to the host after the run's code and before its done frame.

Each new or changed regular file goes out as `artifact` frames, base64 pieces well under the frame cap.
What is left out (hidden, a symlink, not a regular file, over the cap, a name the host would refuse) is
announced with an `artifact_skipped` frame, once per version, so the result can name it. No symlink is
followed: the last component is opened with O_NOFOLLOW after an lstat, and folders are walked with lstat.
The host checks every path and byte again; this side only keeps honest runs from wasting the channel.
"""
import binascii
import os
import stat

from .frames import Ascii

DEFAULT_DIR = "/workspace/artifacts"
CHUNK_BYTES = 4 * 1024 * 1024
"""Raw bytes per artifact frame (about 5.6 MB as base64, far below the 16 MiB frame cap)."""
DEFAULT_MAX_FILE = 50 * 1024 * 1024
DEFAULT_MAX_FILES = 100
MAX_ENTRIES = 10_000
"""Most folder entries one collection looks at, so a huge tree can't stall the end of a run."""

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(
    os, "O_CLOEXEC", 0)
_BAD_CHARS = {chr(c) for c in range(32)} | {"\x7f", "\\", ":"}


def path_problem(path):
    """Why `path` (relative to the artifacts folder) can't name an artifact, or None when it can."""
    if not isinstance(path, str) or not path:
        return "the name is empty"
    if path.startswith("/"):
        return "the name is an absolute path; give one relative to the artifacts folder"
    if any(ch in _BAD_CHARS for ch in path):
        return "the name has a control character, backslash or colon"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "the name is not valid UTF-8"
    if len(path) > 1024:
        return "the name is longer than 1024 characters"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"the name has an empty, '.' or '..' component: {path!r}"
        if part.startswith("."):
            return f"hidden files are not collected: {path!r}"
        if len(part.encode("utf-8")) > 255:
            return "a component of the name is longer than 255 bytes"
    return None


class Artifacts:
    """Collects a session's artifacts at the end of each run; `send(frame)` delivers frames to the host."""

    def __init__(self, send, config):
        settings = config.get("artifacts")
        self.enabled = isinstance(settings, dict)
        settings = settings if self.enabled else {}
        self.dir = str(settings.get("dir") or DEFAULT_DIR)
        self.max_file = int(settings.get("max_file") or DEFAULT_MAX_FILE)
        self.max_files = int(settings.get("max_files") or DEFAULT_MAX_FILES)
        self._send = send
        self._known = {}
        """Relative path -> the version (stat signature) last sent or announced as left out."""
        if self.enabled:
            try:
                os.makedirs(self.dir, exist_ok=True)
            except OSError:
                pass  # a read-only or missing /workspace: nothing will be collected

    def save(self, name, data):
        """Writes `data` (bytes or str) as artifact `name`; returns its path in the sandbox."""
        problem = path_problem(name)
        if problem:
            raise ValueError(f"Cannot save artifact {name!r}: {problem}")
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        elif not isinstance(data, bytes):
            raise TypeError(f"save_artifact() takes bytes or str, not {type(data).__name__}")
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return path

    def collect(self, execution_id):
        """Sends every new or changed file, and announces what is left out; never raises."""
        if not self.enabled:
            return
        try:
            sent = 0
            for rel, kind, info in self._walk():
                signature = _signature(info) if info is not None else None
                if self._known.get(rel) == (kind, signature):
                    continue
                self._known[rel] = (kind, signature)
                if kind == "file" and sent >= self.max_files:
                    kind = "too_many"
                    self._known.pop(rel)  # sent by a later run once there is room
                if kind == "file":
                    sent += self._send_file(execution_id, rel)
                else:
                    frame = {"type": "artifact_skipped", "id": execution_id, "path": rel, "reason": kind}
                    if info is not None and kind == "too_large":
                        frame["size"] = info.st_size
                    self._send(frame)
        except BaseException:  # a late interrupt or a vanished folder: the host drops unfinished files
            pass

    def _walk(self):
        """(relative path, kind, lstat result) for each entry, folders first-come; never follows a link."""
        pending = [""]
        seen = 0
        while pending:
            prefix = pending.pop()
            try:
                names = sorted(os.listdir(os.path.join(self.dir, prefix) if prefix else self.dir))
            except OSError:
                continue
            for name in names:
                seen += 1
                if seen > MAX_ENTRIES:
                    return
                rel = prefix + name
                if name.startswith("."):
                    yield rel, "hidden", None
                    continue
                try:
                    info = os.lstat(os.path.join(self.dir, rel))
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    pending.append(rel + "/")
                elif stat.S_ISLNK(info.st_mode):
                    yield rel, "symlink", info
                elif not stat.S_ISREG(info.st_mode):
                    yield rel, "not_regular", info
                elif path_problem(rel):
                    yield rel, "bad_name", info
                elif info.st_size > self.max_file:
                    yield rel, "too_large", info
                else:
                    yield rel, "file", info

    def _send_file(self, execution_id, rel):
        """Sends one file in pieces; returns 1 when it went out, 0 when it was announced as left out."""
        base = {"type": "artifact", "id": execution_id, "path": rel}
        try:
            fd = os.open(os.path.join(self.dir, rel), _OPEN_FLAGS)
        except OSError:
            self._send({"type": "artifact_skipped", "id": execution_id, "path": rel, "reason": "unreadable"})
            return 0
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # swapped for a FIFO or device since the walk
                self._send({**base, "type": "artifact_skipped", "reason": "not_regular"})
                return 0
            size = info.st_size
            if size > self.max_file:
                self._send({**base, "type": "artifact_skipped", "reason": "too_large", "size": size})
                return 0
            offset = 0
            while True:
                chunk = os.read(fd, min(CHUNK_BYTES, size - offset)) if offset < size else b""
                end = len(chunk) == 0 or offset + len(chunk) >= size
                frame = {**base, "offset": offset, "data": Ascii(binascii.b2a_base64(chunk, newline=False))}
                offset += len(chunk)
                if end:
                    frame["end"] = True
                    frame["size"] = offset
                elif offset == len(chunk):
                    frame["size"] = size
                self._send(frame)
                if end:
                    return 1
        except OSError:
            self._send({**base, "type": "artifact_skipped", "reason": "unreadable"})
            return 0
        finally:
            os.close(fd)


def _signature(info):
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns, info.st_mode)
