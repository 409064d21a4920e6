"""Plans: `async with runtime.plan("what this does"):` runs its block twice, with one question between.

First as a dry run: tools their server annotates read-only run, every other call is recorded by the host
and answers None. Then the host asks the user one question listing every recorded call; on approval the
block runs again for real, and exactly the approved calls (matched by server, tool and arguments, as
many times as recorded) go out without further questions. Any other call that could change something is
refused (or asked about, CODEMODE_PLAN_UNPLANNED=ask). Declined: the block does not run again and the
`async with` raises PermissionError. The approval lives on the host, for this run only: nothing here can
grant it.

A `with` block cannot run twice by itself, so the executor rewrites each `async with <x>.plan(...) [as p]:`
into a loop over the plan's passes (`rewrite`); anything that is not a codemode plan passes through that
loop once, unchanged. A block with `break`, `continue`, `return` or `yield` of its own is not rewritten
(the loop would change what they mean), and a codemode plan there raises an error saying so.
"""
import ast
import contextvars

from codemode_runtime import context
from codemode_runtime.rpc import mcp_error

from . import _dry_run

PASSES = "__codemode_plan_passes__"
"""The builtin the rewritten code calls with the object the `async with` named."""

_active = contextvars.ContextVar("codemode_plan", default=None)


def current():
    """(plan id, dry) of the plan whose block is running here, or None."""
    return _active.get()


class Plan:
    """What `runtime.plan(description)` returns; `async with` it (in run_python code) to run a plan."""

    def __init__(self, description):
        self.description = str(description)
        self.dry = None
        """True during the rehearsal, False during the approved run."""
        self.calls = None
        """How many calls the user approved (after the rehearsal)."""

    async def __aenter__(self):
        raise mcp_error(RuntimeError, "runtime.plan() runs its block twice, so it works only as "
                        "`async with runtime.plan(...):` written directly in run_python code (or a skill), alone in "
                        "its `async with`, and with no break, continue, return or yield inside the block")

    async def __aexit__(self, *exc):
        return False

    def __enter__(self):
        raise TypeError("Use `async with runtime.plan(...):`: the user's answer is awaited")

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        state = {None: "not started", True: "rehearsing", False: "approved, running"}[self.dry]
        return f"<plan {self.description!r}: {state}>"


def passes(value):
    """The passes `async with value` makes: a plan's rehearsal and approved run, anything else once."""
    return _Passes(value) if isinstance(value, Plan) else _Once(value)


class _Once:
    def __init__(self, value):
        self._value = value

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._value is _DONE:
            raise StopAsyncIteration
        value, self._value = self._value, _DONE
        return value


_DONE = object()


class _Passes:
    def __init__(self, plan):
        self._plan = plan
        self._next = "rehearse"
        self._id = None

    def __aiter__(self):
        return self

    async def __anext__(self):
        step = self._next
        if step == "rehearse":
            if current() is not None or _dry_run.active():
                raise mcp_error(RuntimeError, "A plan cannot run inside another plan or a dry run")
            answer = await _rpc().call("plan_begin", {"description": self._plan.description})
            self._id = answer["id"]
            self._next = "run"
            return _Pass(self, dry=True)
        if step == "run":
            self._next = "done"
            return _Pass(self, dry=False)
        raise StopAsyncIteration

    async def approve(self):
        """Asks the user (through the host) to approve what the rehearsal recorded; raises if declined."""
        self._next = "done"
        answer = await _rpc().call("plan_approve", {"id": self._id})
        self._plan.calls = answer.get("calls")
        self._next = "run"

    async def end(self):
        self._next = "done"
        try:
            await _rpc().call("plan_end", {"id": self._id})
        except Exception:  # the plan dies with the run on the host anyway
            pass


class _Pass:
    """One run of the block: marks its calls with the plan (and as dry while rehearsing)."""

    def __init__(self, passes, dry):
        self._passes = passes
        self._dry = dry
        self._token = None

    async def __aenter__(self):
        plan = self._passes._plan
        plan.dry = self._dry
        self._token = _active.set((self._passes._id, self._dry))
        return plan

    async def __aexit__(self, kind, error, traceback):
        _active.reset(self._token)
        if kind is None and self._dry:
            try:
                await self._passes.approve()
            except BaseException:
                await self._passes.end()
                raise
        else:
            await self._passes.end()
        return False


def _rpc():
    return context.current().rpc


def rewrite(tree):
    """The tree with each `async with <x>.plan(...) [as p]: body` turned into a loop over its passes."""
    return _Rewriter().visit(tree)


class _Rewriter(ast.NodeTransformer):
    def visit_AsyncWith(self, node):
        self.generic_visit(node)
        if len(node.items) != 1 or not _names_plan(node.items[0].context_expr) or _leaves(node.body):
            return node
        item = node.items[0]
        step = ast.Name(id="__codemode_pass", ctx=ast.Store())
        inner = ast.AsyncWith(items=[ast.withitem(context_expr=ast.Name(id="__codemode_pass", ctx=ast.Load()),
                                                  optional_vars=item.optional_vars)], body=node.body)
        call = ast.Call(func=ast.Name(id=PASSES, ctx=ast.Load()), args=[item.context_expr], keywords=[])
        loop = ast.AsyncFor(target=step, iter=call, body=[inner], orelse=[])
        for new in (step, inner, inner.items[0].context_expr, call, call.func, loop):
            ast.copy_location(new, node)
        return ast.fix_missing_locations(loop)


def _names_plan(expression):
    """`runtime.plan(...)`, `mcp.runtime.plan(...)`, `plan(...)` (any object's plan: the loop passes others through)."""
    if not isinstance(expression, ast.Call):
        return False
    func = expression.func
    return (isinstance(func, ast.Attribute) and func.attr == "plan") or (isinstance(func, ast.Name) and func.id == "plan")


def _leaves(body):
    """Whether the block has a break, continue, return or yield of its own (not in a nested loop or def)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
                # Their own break and continue stay theirs; a return or yield inside still leaves the block.
                stack.extend(n for n in ast.walk(child) if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom))
                             and not _inside_def(child, n))
                continue
            stack.append(child)
    return False


def _inside_def(root, target):
    for node in ast.walk(root):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not root:
            if any(n is target for n in ast.walk(node)):
                return True
    return False
