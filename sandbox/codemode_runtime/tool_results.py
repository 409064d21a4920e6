"""A tool's result as the value Python code gets.

The host passes the MCP server's `tools/call` response through as the server wrote it (an `rpc_result`
frame's "reply"), after checking it against the SDK's schema, so it is decoded once, here, by
`json.loads`: numbers and key order reach user code exactly as the server sent them ("5.0" stays a
float, integers of any size stay exact), which a JavaScript host could not promise after its own decode.

Unwrapped (the default): `structuredContent` when present; else, when every item is text, the texts
joined with newlines, decoded as JSON when the whole text is a JSON document (exactly as `json.loads`
decodes it); else a list with text items as str, images, audio and blob resources as MimeBytes, and
other items unchanged; no content at all is None. `raw=True` gives the whole result, with the base64
fields of binary content as MimeBytes. Errors (`isError`) never get here: the host redacts their text
and raises them as ToolError.
"""
import base64
import binascii
import json
import re

from .values import MimeBytes

_JSON_START = re.compile(r"\s*[{\[\"\-0-9]|\s*(?:true|false|null)\s*$")
"""Where JSON text can start: anything else stays text without paying for a failed parse."""

class ResultNestingError(ValueError):
    """A tool's JSON text is nested too deeply to decode."""


def tool_result(reply, raw=False):
    """The value user code gets from a tools/call `reply` (the server's JSON-RPC response)."""
    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, dict):
        result = {}
    return raw_result(result) if raw else unwrap(result)


def unwrap(result):
    """structuredContent, else the text (JSON-decoded when it is JSON), else the content items."""
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    content = result.get("content")
    if not isinstance(content, list) or not content:
        return None
    if all(isinstance(item, dict) and item.get("type") == "text" for item in content):
        return decode_text("\n".join(_text(item) for item in content))
    return [_text(item) if _is_text(item) else _item(item) for item in content]


def raw_result(result):
    """The whole result; base64 data of images, audio and blob resources as MimeBytes."""
    content = result.get("content")
    items = content if isinstance(content, list) else []
    return {**result, "content": [_with_bytes(item) for item in items]}


def decode_text(text):
    """`text` decoded as `json.loads` decodes it when it is one JSON document; else `text` itself.
    NaN and Infinity are not JSON, so text that is only those stays text."""
    if not _JSON_START.match(text):
        return text
    try:
        return json.loads(text, parse_constant=_not_json)
    except RecursionError:
        raise ResultNestingError(
            "The tool's JSON text is nested too deeply for Python's JSON decoder; ask the tool for a "
            "flatter shape, or use raw=True and decode the text yourself"
        ) from None
    except ValueError:
        return text


def _not_json(constant):
    raise ValueError(f"{constant} is not JSON")


def _is_text(item):
    return isinstance(item, dict) and item.get("type") == "text"


def _text(item):
    text = item.get("text")
    return text if isinstance(text, str) else ""


def _item(item):
    binary = _binary(item)
    return item if binary is None else binary


def _binary(item):
    if not isinstance(item, dict):
        return None
    if item.get("type") in ("image", "audio") and isinstance(item.get("data"), str):
        return _bytes(item["data"], item.get("mimeType"))
    resource = item.get("resource") if item.get("type") == "resource" else None
    if isinstance(resource, dict) and isinstance(resource.get("blob"), str):
        return _bytes(resource["blob"], resource.get("mimeType"))
    return None


def _with_bytes(item):
    if not isinstance(item, dict):
        return item
    if item.get("type") in ("image", "audio") and isinstance(item.get("data"), str):
        return {**item, "data": _bytes(item["data"], item.get("mimeType"))}
    resource = item.get("resource") if item.get("type") == "resource" else None
    if isinstance(resource, dict) and isinstance(resource.get("blob"), str):
        return {**item, "resource": {**resource, "blob": _bytes(resource["blob"], resource.get("mimeType"))}}
    return item


def _bytes(data, mime_type):
    try:
        decoded = base64.b64decode(data)
    except (binascii.Error, ValueError):  # the schema says base64; a server that lies gets its text back
        return data
    return MimeBytes(decoded, mime_type if isinstance(mime_type, str) and mime_type else
                     "application/octet-stream")
