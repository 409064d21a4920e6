"""JSON frames: one object per line, capped in size."""
import json

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest frame either side accepts, newline included."""

OUTPUT_CHUNK_BYTES = 64 * 1024
"""Most user output bytes carried by one output frame."""


class Ascii(bytes):
    """Bytes that need no escaping inside a JSON string (base64): a frame's "data" of this type is spliced
    into the line as is, instead of going through the JSON encoder and UTF-8 again (megabytes per piece)."""


def encode(frame):
    """Serialises a frame to one line of UTF-8; raises ValueError when it is over the cap."""
    payload = frame.get("data") if isinstance(frame, dict) else None
    if isinstance(payload, Ascii):
        head = _dumps({key: value for key, value in frame.items() if key != "data"})
        data = head[:-1] + b',"data":"' + payload + b'"}\n'
    else:
        data = _dumps(frame) + b"\n"
    if len(data) > MAX_FRAME_BYTES:
        kind = frame.get("type", "?") if isinstance(frame, dict) else "?"
        raise ValueError(
            f"Frame {kind!r} is {len(data)} bytes, over the {MAX_FRAME_BYTES} byte limit: "
            "send less data per call"
        )
    return data


def _dumps(frame):
    text = _ENCODER.encode(frame)
    # A lone surrogate can't be UTF-8 encoded; as a \uXXXX escape it is still valid JSON for the host.
    return text.encode("utf-8", "backslashreplace")


def decode(line):
    """Parses one frame (str, or UTF-8 bytes); returns None for anything that is not a JSON object."""
    try:
        # json.loads(bytes) sniffs the encoding in Python first: decoding here costs half as much.
        frame = json.loads(line if isinstance(line, str) else line.decode("utf-8"))
    except (ValueError, RecursionError):  # a frame too deep to decode is dropped, not fatal to the reader
        return None
    return frame if isinstance(frame, dict) else None


def _fallback(value):
    if isinstance(value, (bytes, bytearray)):
        import base64

        return {"__codemode_bytes__": base64.b64encode(value).decode("ascii"),
                "mime_type": getattr(value, "mime_type", "application/octet-stream")}
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"Cannot send a value of type {type(value).__name__!r} to the host: "
                    "pass JSON-compatible data (dict, list, str, int, float, bool, None, bytes)")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_fallback)
"""One encoder for every frame (json.dumps with options builds a new one per call)."""
