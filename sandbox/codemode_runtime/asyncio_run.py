"""asyncio.run() in cells that already run inside the session's event loop.

Every cell runs inside the session's running loop (as in Jupyter), where asyncio.run() and a loop's
run_until_complete() cannot start the loop again. Programs often end with `asyncio.run(main())`, so the
cell's top-level code (not function or class bodies) is rewritten before it is compiled:

    asyncio.run(X)                                  ->  await X
    asyncio.get_event_loop().run_until_complete(X)  ->  await X   (also get_running_loop, new_event_loop)
    loop.run_until_complete(X)                      ->  (await X) if loop is an event loop, else unchanged

so X runs to completion in the session's loop. Anywhere else, asyncio.run() called inside the running loop
raises a RuntimeError that says what to write instead.
"""
import ast
import asyncio

_ORIGINAL_RUN = asyncio.run


class _TopLevel(ast.NodeTransformer):
    """Rewrites the calls in a module's own code; bodies that run later (functions, classes, lambdas,
    generator expressions) are left as they are."""

    changed = False

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_GeneratorExp = visit_FunctionDef

    def visit_Call(self, node):
        self.generic_visit(node)
        if len(node.args) != 1 or node.keywords and not _only_debug(node.keywords):
            return node
        func = node.func
        if not isinstance(func, ast.Attribute):
            return node
        awaited = ast.copy_location(ast.Await(value=node.args[0]), node)
        if func.attr == "run" and _is_name(func.value, "asyncio"):
            self.changed = True
            return awaited
        if func.attr != "run_until_complete" or node.keywords:
            return node
        if _loop_call(func.value):
            self.changed = True
            return awaited
        if isinstance(func.value, ast.Name):  # most likely a loop; anything else keeps its own method
            self.changed = True
            loop_class = ast.Attribute(value=_asyncio_module(), attr="AbstractEventLoop", ctx=ast.Load())
            test = ast.Call(func=ast.Name(id="isinstance", ctx=ast.Load()), args=[func.value, loop_class], keywords=[])
            return ast.copy_location(ast.IfExp(test=test, body=awaited, orelse=node), node)
        return node


def rewrite(tree, source):
    """The module `tree` of `source` with its top-level asyncio.run() / run_until_complete() calls awaited
    instead. Walking the tree costs more than compiling a small cell, so a source that names neither is
    returned as it is."""
    if ".run" not in source:
        return tree
    rewriter = _TopLevel()
    tree = rewriter.visit(tree)
    return ast.fix_missing_locations(tree) if rewriter.changed else tree


def install():
    """Makes asyncio.run() say what to do when it is called inside the running loop (not at top level)."""
    if asyncio.run is not _ORIGINAL_RUN:
        return

    def run(main, **kwargs):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return _ORIGINAL_RUN(main, **kwargs)
        if asyncio.iscoroutine(main):
            main.close()  # not run: no "was never awaited" warning on top of the error
        raise RuntimeError(
            "asyncio.run() cannot be called here: run_python code runs inside the session's event loop (as in "
            "Jupyter). Await the coroutine instead (`await main()`); asyncio.run(main()) is only rewritten to "
            "that in a cell's top-level code"
        )

    run.__doc__ = _ORIGINAL_RUN.__doc__
    asyncio.run = run


def _is_name(node, name):
    return isinstance(node, ast.Name) and node.id == name


def _only_debug(keywords):
    return all(keyword.arg == "debug" for keyword in keywords)


def _loop_call(node):
    """asyncio.get_event_loop(), get_running_loop() or new_event_loop()."""
    return (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("get_event_loop", "get_running_loop", "new_event_loop")
        and _is_name(node.func.value, "asyncio")
    )


def _asyncio_module():
    """`__import__("asyncio")`: the module itself, whatever the cell bound the name `asyncio` to."""
    return ast.Call(func=ast.Name(id="__import__", ctx=ast.Load()), args=[ast.Constant("asyncio")], keywords=[])
