"""Binary values cross the JSON channel as {"__codemode_bytes__": base64, "mime_type": m}."""
import base64

BYTES_MARKER = "__codemode_bytes__"


class MimeBytes(bytes):
    """Bytes from a tool result, with the MIME type the server gave them."""

    mime_type: str

    def __new__(cls, data=b"", mime_type="application/octet-stream"):
        self = super().__new__(cls, data)
        self.mime_type = mime_type
        return self

    def __repr__(self):
        return f"MimeBytes(<{len(self)} bytes>, mime_type={self.mime_type!r})"

    def __reduce__(self):
        return (MimeBytes, (bytes(self), self.mime_type))


MimeBytes.__module__ = "mcp"


def decode_value(value):
    """Returns `value` with every bytes marker in it, at any depth, turned into MimeBytes."""
    if isinstance(value, dict):
        if BYTES_MARKER in value and isinstance(value[BYTES_MARKER], str):
            mime_type = value.get("mime_type") or "application/octet-stream"
            return MimeBytes(base64.b64decode(value[BYTES_MARKER]), mime_type)
        return {key: decode_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    return value
