"""Runs one cell of user code in the persistent namespace, like a REPL: top-level await works and the
value of a final expression is returned. Cells run inside the session's running event loop (as in Jupyter),
so `asyncio.create_task()` and `asyncio.get_running_loop()` work at top level; top-level asyncio.run()
calls are rewritten to awaits (asyncio_run.py)."""
import ast
import inspect
import traceback

from . import asyncio_run
from .tracebacks import SourceMap, format_exception

FILENAME = "<run_python>"
"""The filename user code gets in tracebacks."""

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class Outcome:
    """What running a cell produced: status "ok" with an optional value repr, or "error" with text; notes
    for the result (e.g. tasks the run left that were cancelled)."""

    __slots__ = ("status", "value", "error", "exception", "check", "notes")

    def __init__(self, status, value=None, error=None, exception=None, check=None):
        self.status = status
        self.value = value
        self.error = error
        self.exception = exception
        self.check = check
        """The pre-run check's findings when it stopped the cell (or the cell did not compile)."""
        self.notes = []

    def __repr__(self):
        return f"Outcome({self.status!r}, value={self.value!r}, error={self.error!r})"


class Executor:
    """Compiles and runs cells against one namespace; knows nothing about transports or timeouts."""

    def __init__(self, namespace, display_value=None):
        self.namespace = namespace
        self.sources = SourceMap(FILENAME)
        self.display_value = display_value
        """Shows a final value that has a rich form (returns True), instead of returning its repr."""
        self.prepare = None
        """What runs between parsing a cell and compiling it (mcp/_precheck.py: the pre-run check and the
        plan rewrite): `cell(source, tree)` returns the tree to compile, or an Outcome that stops the cell
        before anything runs; `syntax_error(source, error)` returns the findings of a cell that does not
        compile."""

    def compile(self, source):
        """Splits a cell into code objects: [(code, is_final_expression)]; raises SyntaxError."""
        tree = compile(source, FILENAME, "exec", _FLAGS | ast.PyCF_ONLY_AST, dont_inherit=True)
        return self._compile_tree(tree, source)

    def _compile_tree(self, tree, source):
        tree = asyncio_run.rewrite(tree, source)
        parts = []
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            head = ast.Module(body=tree.body[:-1], type_ignores=[])
            if head.body:
                parts.append((compile(head, FILENAME, "exec", _FLAGS, dont_inherit=True), False))
            tail = ast.Expression(body=tree.body[-1].value)
            parts.append((compile(tail, FILENAME, "eval", _FLAGS, dont_inherit=True), True))
        else:
            parts.append((compile(tree, FILENAME, "exec", _FLAGS, dont_inherit=True), False))
        for code, _ in parts:
            self.sources.add(code, source)
        return parts

    async def run_async(self, source):
        """Runs a cell; call it from a task of the session's running loop."""
        parts = self._compile_or_outcome(source)
        if isinstance(parts, Outcome):
            return parts
        value = None
        try:
            for code, is_expression in parts:
                result = eval(code, self.namespace)
                if code.co_flags & inspect.CO_COROUTINE:
                    result = await result
                if is_expression:
                    value = result
        except BaseException as exc:  # noqa: BLE001
            return self.failure(exc)
        return self.success(value)

    def success(self, value):
        """An ok outcome carrying repr(value) (or nothing, when the value was displayed instead), or an
        error outcome if repr() fails."""
        if value is None:
            return Outcome("ok")
        try:
            if self.display_value is not None and self.display_value(value):
                return Outcome("ok")
            return Outcome("ok", value=repr(value))
        except BaseException as exc:  # noqa: BLE001
            return self.failure(exc)

    def failure(self, exc):
        """An error outcome whose text is the traceback of the user's frames."""
        try:
            text = format_exception(exc, self.sources)
        except Exception:  # a hostile __str__ must not take the runtime down
            text = f"{type(exc).__name__}: <exception could not be formatted>\n"
        return Outcome("error", error=text, exception=exc)

    def _compile_or_outcome(self, source):
        try:
            tree = compile(source, FILENAME, "exec", _FLAGS | ast.PyCF_ONLY_AST, dont_inherit=True)
            if self.prepare is not None:
                tree = self.prepare.cell(source, tree)
                if isinstance(tree, Outcome):
                    return tree
            return self._compile_tree(tree, source)
        except SyntaxError as exc:
            text = "".join(traceback.format_exception_only(type(exc), exc))
            return Outcome("error", error=text, exception=exc, check=self._syntax_findings(source, exc))
        except (ValueError, OverflowError) as exc:  # e.g. null bytes on Python 3.11
            return Outcome("error", error=f"SyntaxError: {exc}\n", exception=exc,
                           check=self._syntax_findings(source, exc))

    def _syntax_findings(self, source, exc):
        return self.prepare.syntax_error(source, exc) if self.prepare is not None else None
