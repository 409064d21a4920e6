"""Binary values from tool results: bytes that know their MIME type."""


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
