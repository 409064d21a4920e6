"""Files the host puts into the sandbox before a run (`codemode run --file`, mounts under Pyodide): `file`
frames carry base64 pieces in order; the last one closes the file and a `file_done` frame answers. A frame
with `dir` makes a folder instead (sent after the folder's files, so a read-only folder can be sealed)."""
import base64
import os
import posixpath


class FileReceiver:
    """Writes incoming files; `send(frame)` delivers the answers."""

    def __init__(self, send):
        self._send = send
        self._open = {}
        """File id -> (fd, path) of each file still arriving."""

    def handle(self, frame):
        """Takes one `file` frame; answers with `file_done` once the file is complete or has failed."""
        file_id = str(frame.get("id"))
        entry = self._open.get(file_id)
        try:
            if frame.get("dir"):
                path = _target(frame.get("path"))
                os.makedirs(path, exist_ok=True)
                if frame.get("read_only"):
                    os.chmod(path, 0o555)
                self._send({"type": "file_done", "id": file_id, "ok": True})
                return
            if entry is None:
                if frame.get("offset"):
                    raise ValueError("the first piece of a file must start at offset 0")
                path = _target(frame.get("path"))
                os.makedirs(posixpath.dirname(path), exist_ok=True)
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
                entry = (os.open(path, flags, 0o644), path)
                self._open[file_id] = entry
            fd, path = entry
            view = memoryview(base64.b64decode(frame.get("data") or "", validate=True))
            while view:
                view = view[os.write(fd, view):]
            if frame.get("end"):
                self._close(file_id)
                if frame.get("read_only"):
                    os.chmod(path, 0o444)
                self._send({"type": "file_done", "id": file_id, "ok": True})
        except Exception as exc:  # noqa: BLE001 - any failure is reported, the session goes on
            self._close(file_id)
            self._send({"type": "file_done", "id": file_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _close(self, file_id):
        entry = self._open.pop(file_id, None)
        if entry is not None:
            os.close(entry[0])


def _target(path):
    if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) != path:
        raise ValueError(f"the sandbox path {path!r} must be absolute and normalised")
    return path
