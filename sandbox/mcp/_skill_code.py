"""What a skill's code offers and calls, read with Python's `ast` (never run): its public functions, and
every MCP tool call with literal names (`mcp_<alias>.<tool>(...)`, `mcp_servers["name"].<tool>(...)`,
`call_tool("server", "tool", {...})`, and tools imported from `mcp.servers.<alias>`), with their keyword
arguments, for the host's drift check (core/skills/check.ts). The calls are found by _calls.py, which
the pre-run check shares."""
import ast

from . import _calls

MAX_CALLS = _calls.MAX_CALLS
_DRIFT_FIELDS = ("line", "server", "tool", "via", "keywords", "dynamic", "positional")


def analyse(source, filename="<skill>"):
    """{"functions": [...], "calls": [...], "error": None | {"line", "message"}} for one skill's code."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None) or 0
        return {"functions": [], "calls": [],
                "error": {"line": line, "message": f"{type(error).__name__}: {getattr(error, 'msg', error)}"}}
    calls = [{key: call[key] for key in _DRIFT_FIELDS if key in call}
             for call in _calls.find(tree).calls[:MAX_CALLS] if call["via"] != "skill"]
    return {"functions": public_functions(tree), "calls": calls, "error": None}


def public_functions(tree):
    """The module's entry points: top-level functions and classes not starting with "_" (or those in a
    literal `__all__`), with signature, first docstring paragraph and whether they are async."""
    exported = _literal_all(tree)
    entries = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if (exported is not None and node.name not in exported) or (exported is None and node.name.startswith("_")):
            continue
        entry = {"name": node.name, "doc": _first_paragraph(ast.get_docstring(node)), "line": node.lineno}
        if isinstance(node, ast.ClassDef):
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            entry.update(kind="class", signature=_signature(init, skip_self=True) if init else "()")
        else:
            entry.update(kind="function", signature=_signature(node),
                         **{"async": isinstance(node, ast.AsyncFunctionDef)})
        entries.append(entry)
    return entries


def _literal_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _literal_all(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                names = [_literal_str(e) for e in node.value.elts]
                if all(n is not None for n in names):
                    return set(names)
    return None


def _signature(node, skip_self=False):
    args = node.args
    if skip_self and (args.posonlyargs or args.args):
        args = ast.arguments(**{**{f: getattr(args, f) for f in args._fields}})
        if args.posonlyargs:
            args.posonlyargs = args.posonlyargs[1:]
        else:
            args.args = args.args[1:]
    text = f"({ast.unparse(args)})"
    if getattr(node, "returns", None) is not None:
        text += f" -> {ast.unparse(node.returns)}"
    return text


def _first_paragraph(doc):
    return (doc or "").strip().split("\n\n")[0].strip()
