"""Rich display: `display(*objs)`, the last expression's value, and matplotlib figures, sent to the host
as `display` frames in the order they happen, between the run's output frames.

An object displays by its richest form: a matplotlib figure or a PIL image as PNG; a pandas DataFrame or
Series as a text table (models read text, not HTML); else the first of `_repr_mimebundle_`,
`_repr_png_`, `_repr_jpeg_`, `_repr_svg_`, `_repr_markdown_`, `_repr_html_` that gives something (as in
IPython, None means "not this one"); else repr() as text/plain. Images travel base64-encoded, text as
text; a display larger than one frame is sent in several, each with `more` until the last.

Each run may send `limit` bytes of displays in all (the host's CODEMODE_MAX_DISPLAY) and at most
MAX_DISPLAYS of them; a display that does not fit is announced with `dropped` and no data, so the
result can say what was left out. The host checks all of it again: these frames are untrusted there.
"""
import base64
import inspect
import threading

from . import figures

MAX_DISPLAYS = 500
"""Most displays one run may send; the host enforces the same number."""

DEFAULT_MAX_DISPLAY = 8 * 1024 * 1024

IMAGE_MIMES = ("image/png", "image/jpeg")
"""Displays sent as base64 images; every other display is text."""

_RICH_ORDER = (
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/html", "_repr_html_"),
)
_SIGNATURES = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",)}
_CHUNK_BYTES = 3 * 1024 * 1024
"""Raw bytes per image frame: a multiple of 3, so every frame's base64 decodes on its own (4 MiB)."""
_CHUNK_CHARS = 1024 * 1024
"""Characters per text frame: even all escaped as \\u00XX, a frame stays under the 16 MiB cap."""
_TEXT_FORM_CHARS = 300
"""Longest text form sent along with an image (its repr, for the structured result)."""


class Displayer:
    """Sends one session's displays; thread-safe, one run at a time."""

    def __init__(self, send, limit=DEFAULT_MAX_DISPLAY, sync_output=None):
        self._send = send
        self.limit = int(limit)
        self._sync_output = sync_output or (lambda: None)
        self._lock = threading.RLock()
        self._id = None
        self.used = 0
        self.count = 0
        self.figures = figures.FigureTracker(self)
        self.job_of = None
        """Returns the Job the calling code belongs to (its displays are kept for it), or None."""

    def begin(self, execution_id):
        """Starts a run: its frames carry `execution_id`, and its budget is full again."""
        with self._lock:
            self._id = execution_id
            self.used = 0
            self.count = 0
            self.figures.begin()

    def display(self, *objs, **ipython_options):
        """The `display()` builtin: shows each object by its richest form, in order. IPython's keyword
        arguments (include=, metadata=, clear=, ...) are accepted so code written for it runs; they change
        nothing here."""
        for obj in objs:
            self.show(representation(obj))

    def display_value(self, value):
        """Shows the last expression's value when it has a rich form; False when repr() should do."""
        rep = rich_representation(value)
        if rep is None:
            return False
        self.show(rep)
        return True

    def end(self, render=True):
        """Ends a run: shows the matplotlib figures left open (unless shown unchanged) and closes them."""
        self.figures.show(render)

    def show(self, rep):
        """Sends one (mime, data, text) representation, or announces it dropped when over the budget. A job's
        displays are kept with the job instead, for the run that waits for it."""
        job = self.job_of() if self.job_of is not None else None
        if job is not None:
            job.keep_display(rep)
            return
        mime, data, text = rep
        size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
        with self._lock:
            # Output printed before this display must reach the host before it, so the result keeps the order.
            self._sync_output()
            frame = {"type": "display", "mime": mime, "size": size}
            if self._id is not None:
                frame["id"] = self._id
            if text is not None:
                frame["text"] = text
            if self.count >= MAX_DISPLAYS or self.used + size > self.limit:
                self.count += 1
                self._send({**frame, "dropped": True})
                return
            self.count += 1
            self.used += size
            chunks = _chunks(data)
            head = {key: frame[key] for key in ("type", "mime", "size", "id") if key in frame}
            for index, chunk in enumerate(chunks):
                part = dict(frame if index == 0 else head)  # the text form rides on the first part only
                part["data"] = chunk
                if index < len(chunks) - 1:
                    part["more"] = True
                self._send(part)


def representation(obj):
    """(mime, data, text) for any object: its rich form, else its repr as text/plain."""
    rep = rich_representation(obj)
    if rep is not None:
        return rep
    return "text/plain", repr(obj), None


def rich_representation(obj):
    """(mime, data, text) for objects with a rich form, else None. `data` is bytes for images, str for
    text; `text` is a short description of an image."""
    if isinstance(obj, type):  # a class has the _repr_*_ functions of its instances, unbound
        return None
    figure = figures.as_figure(obj)
    if figure is not None:
        return "image/png", figures.render(figure), _short_repr(figure)
    table = _pandas_table(obj)
    if table is not None:
        return "text/plain", table, None
    if _is_pil_image(obj):
        image = _pil_png(obj)
        if image is not None:
            return "image/png", image, _short_repr(obj)
    bundle = _call(obj, "_repr_mimebundle_", include=None, exclude=None)
    if isinstance(bundle, tuple) and bundle:
        bundle = bundle[0]
    for mime, method in _RICH_ORDER:
        data = bundle.get(mime) if isinstance(bundle, dict) else None
        if data is None:
            data = _call(obj, method)
        rep = _checked(mime, data, obj)
        if rep is not None:
            return rep
    return None


def _call(obj, method, **kwargs):
    """obj.method(**kwargs), or None when it is missing or fails (a broken formatter falls back to the
    next one)."""
    try:
        function = getattr(obj, method, None)
        value = function(**kwargs) if callable(function) else None
    except Exception:
        return None
    if inspect.iscoroutine(value):  # a formatter that needs awaiting is no formatter; don't leave it pending
        value.close()
        return None
    return value


def _checked(mime, data, obj):
    if isinstance(data, tuple) and data:  # (data, metadata), as IPython allows
        data = data[0]
    if mime in IMAGE_MIMES:
        if isinstance(data, str):  # IPython takes str image data as base64 already
            try:
                data = base64.b64decode(data, validate=True)
            except ValueError:
                return None
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            if data.startswith(_SIGNATURES[mime]):
                return mime, data, _short_repr(obj)
        return None
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return (mime, data, None) if isinstance(data, str) and data else None


def _pandas_table(obj):
    """A DataFrame or Series as the text table pandas prints, within pandas' display options."""
    pandas_types = ("DataFrame", "Series")
    if not any(c.__module__.startswith("pandas.") and c.__name__ in pandas_types for c in type(obj).__mro__):
        return None
    try:
        import pandas

        if not isinstance(obj, (pandas.DataFrame, pandas.Series)):
            return None
        rows = pandas.get_option("display.max_rows")
        if isinstance(obj, pandas.DataFrame):
            columns = pandas.get_option("display.max_columns")
            return obj.to_string(max_rows=rows, max_cols=columns, show_dimensions=True)
        return obj.to_string(max_rows=rows, name=True, dtype=True, length=True)
    except Exception:
        return None


def _is_pil_image(obj):
    return any(c.__module__.startswith("PIL.") and c.__name__ == "Image" for c in type(obj).__mro__)


def _pil_png(image):
    import io

    try:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()
    except Exception:
        return None


def _short_repr(obj):
    try:
        text = repr(obj)
    except Exception:
        return None
    return text if len(text) <= _TEXT_FORM_CHARS else text[:_TEXT_FORM_CHARS] + "..."


def _chunks(data):
    if isinstance(data, bytes):
        return [base64.b64encode(data[i : i + _CHUNK_BYTES]).decode("ascii")
                for i in range(0, len(data), _CHUNK_BYTES)] or [""]
    return [data[i : i + _CHUNK_CHARS] for i in range(0, len(data), _CHUNK_CHARS)] or [""]
