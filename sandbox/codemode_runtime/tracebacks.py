"""Tracebacks that show the user's code and what it called, never the runtime around it."""
import traceback

RUNTIME_PREFIX = "<codemode>/"
"""Filename prefix of every runtime module (set by the bootstrap importer)."""


class SourceMap:
    """Remembers the source of every cell, so frames of old cells still show their own lines."""

    def __init__(self, filename):
        self.filename = filename
        self._lines = {}
        self.cells = []
        """Every cell's source, oldest first: what a cell defined can be recovered from it."""

    def add(self, code, source):
        """Records `source` for `code` and every code object nested in it."""
        if not self.cells or self.cells[-1] is not source:
            self.cells.append(source)
        lines = source.splitlines()
        stack = [code]
        while stack:
            current = stack.pop()
            self._lines[current] = lines
            stack.extend(c for c in current.co_consts if hasattr(c, "co_consts"))

    def lines_of(self, code):
        """The lines of the cell that compiled `code` (a function's __code__ too), or None."""
        return self._lines.get(code)

    def line(self, code, lineno):
        """The stripped source line, or "" when unknown."""
        lines = self._lines.get(code)
        if lines and lineno and 0 < lineno <= len(lines):
            return lines[lineno - 1].strip()
        return ""


def format_exception(exc, sources):
    """Formats `exc` (with its causes and contexts) like Python does, minus the runtime's frames."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, lookup_lines=False)
    _filter(te, exc, sources, set())
    return "".join(te.format())


def _filter(te, exc, sources, seen):
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    te.stack = traceback.StackSummary.from_list(list(_user_frames(exc.__traceback__, sources)))
    if te.__cause__ is not None:
        _filter(te.__cause__, exc.__cause__, sources, seen)
    if te.__context__ is not None:
        _filter(te.__context__, exc.__context__, sources, seen)
    for child_te, child in zip(getattr(te, "exceptions", None) or (), getattr(exc, "exceptions", ())):
        _filter(child_te, child, sources, seen)


def _user_frames(tb, sources):
    started = False
    for frame, lineno in traceback.walk_tb(tb):
        code = frame.f_code
        if code.co_filename == sources.filename:
            started = True
            line = sources.line(code, lineno)
            yield traceback.FrameSummary(code.co_filename, lineno, code.co_name, lookup_line=False,
                                         line=line)
        elif started and not code.co_filename.startswith(RUNTIME_PREFIX):
            yield traceback.FrameSummary(code.co_filename, lineno, code.co_name,
                                         locals=None, lookup_line=True)
