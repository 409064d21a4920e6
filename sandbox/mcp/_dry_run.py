"""Dry runs: `async with runtime.dry_run():` (or `with`) marks the tool calls made inside as dry.

The mark travels with the call (`dry_run: true`); the host decides what it means: a tool whose server
annotates it `readOnlyHint: true` runs as usual, any other is not called, answers None and is listed in
the result's `planned_calls`. The mark follows the asyncio context, so tasks started inside the block
(`asyncio.gather`) are dry too, and code outside it is not.
"""
import contextvars

_active = contextvars.ContextVar("codemode_dry_run", default=False)


def active():
    """Whether calls made here are dry."""
    return _active.get()


class DryRun:
    """The context manager `runtime.dry_run()` returns; usable with `with` and `async with`."""

    def __init__(self):
        self._tokens = []

    def __enter__(self):
        self._tokens.append(_active.set(True))
        return self

    def __exit__(self, *exc):
        _active.reset(self._tokens.pop())
        return False

    async def __aenter__(self):
        return self.__enter__()

    async def __aexit__(self, *exc):
        return self.__exit__(*exc)

    def __repr__(self):
        return "<dry run: calls of tools not annotated read-only are recorded, not made>"
