"""Whether a failing call's error would reach the top of the program, judged from where it is written:
awaited (directly, or through gather without return_exceptions, wait_for, shield, asyncio.run), and not
inside a `try` with handlers, a `with suppress(...)`, or a branch whose condition names the tool or server.
The finder (_calls.py) adds what needs the whole program: the functions a call is in, and their callers."""
import ast


_RUNNERS = {"run", "run_until_complete"}
"""Calls that run a coroutine to completion and raise what it raised."""
_AWAIT_WRAPPERS = {"gather", "wait_for", "shield"}
"""Awaited calls whose awaitable arguments' exceptions propagate (gather unless return_exceptions)."""


def awaited_at(chain, i):
    """Where the coroutine made at chain[i] is awaited with its exception propagating, or None."""
    child = chain[i]
    j = i - 1
    while j >= 0:
        parent = chain[j]
        if isinstance(parent, ast.Await):
            return j
        if isinstance(parent, (ast.List, ast.Tuple, ast.Set, ast.Starred)) or (
                isinstance(parent, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and parent.elt is child):
            child, j = parent, j - 1
            continue
        if isinstance(parent, ast.Call) and child in parent.args:
            name = called_name(parent.func)
            if name in _AWAIT_WRAPPERS and (name == "gather" or parent.args[0] is child) and raises(parent):
                child, j = parent, j - 1
                continue
            if name in _RUNNERS and parent.args and parent.args[0] is child:
                return j
        return None
    return None


def raises(call):
    """A gather whose exceptions propagate: no return_exceptions, or return_exceptions=False."""
    for keyword in call.keywords:
        if keyword.arg == "return_exceptions":
            return isinstance(keyword.value, ast.Constant) and keyword.value.value is False
        if keyword.arg is None:
            return False
    return True


def guards(parent, child, names):
    """Whether `parent` may handle or avoid a failure in its part `child`."""
    if isinstance(parent, (ast.Try, ast.TryStar)):
        return bool(parent.handlers) and child in parent.body
    if isinstance(parent, (ast.With, ast.AsyncWith)):
        return child in parent.body and any(called_name(item.context_expr) == "suppress" for item in parent.items)
    if isinstance(parent, (ast.If, ast.While, ast.IfExp)):
        return child is not parent.test and bool(strings(parent.test) & names)
    if isinstance(parent, ast.BoolOp):
        before = parent.values[:parent.values.index(child)] if child in parent.values else []
        return any(strings(value) & names for value in before)
    if isinstance(parent, ast.comprehension):
        return False
    if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return any(strings(test) & names for generator in parent.generators for test in generator.ifs)
    return False


def is_generator(function):
    for node in ast.walk(function):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
    return False


def called_name(node):
    """`suppress` for suppress(...), contextlib.suppress(...); the called attribute or name."""
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def strings(node):
    """The string constants in an expression (what a guard like `"x" in dir(mcp_s)` names)."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
