"""What a skill's code offers and calls, read with Python's `ast` (never run): its public functions, and
every MCP tool call with literal names (`mcp_<alias>.<tool>(...)`, `mcp_servers["name"].<tool>(...)`,
`call_tool("server", "tool", {...})`, and tools imported from `mcp.servers.<alias>`), with their keyword
arguments, for the host's drift check (core/skills/check.ts)."""
import ast

MAX_CALLS = 10_000


def analyse(source, filename="<skill>"):
    """{"functions": [...], "calls": [...], "error": None | {"line", "message"}} for one skill's code."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None) or 0
        return {"functions": [], "calls": [],
                "error": {"line": line, "message": f"{type(error).__name__}: {getattr(error, 'msg', error)}"}}
    finder = _Calls()
    finder.visit(tree)
    return {"functions": public_functions(tree), "calls": finder.calls[:MAX_CALLS], "error": None}


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


class _Calls(ast.NodeVisitor):
    def __init__(self):
        self.calls = []
        self.imported = {}  # local name -> (server alias, tool)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if node.level == 0 and module.startswith("mcp.servers.") and module.count(".") == 2:
            alias = module.split(".")[2]
            for name in node.names:
                if name.name != "*":
                    self.imported[name.asname or name.name] = (alias, name.name)
        self.generic_visit(node)

    def visit_Call(self, node):
        if len(self.calls) < MAX_CALLS:
            self._record(node)
        self.generic_visit(node)

    def _record(self, node):
        func = node.func
        if isinstance(func, ast.Attribute):
            target, attribute = func.value, func.attr
            if attribute.startswith("_"):
                return
            if isinstance(target, ast.Name) and target.id.startswith("mcp_") and target.id != "mcp_servers":
                self._proxy(node, target.id[4:], attribute, "proxy")
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id == "mcp_servers":
                server = _literal_str(target.slice)
                if server is not None:
                    self._proxy(node, server, attribute, "servers")
            elif attribute == "call_tool":
                self._call_tool(node)
        elif isinstance(func, ast.Name):
            if func.id == "call_tool":
                self._call_tool(node)
            elif func.id in self.imported:
                server, tool = self.imported[func.id]
                self._proxy(node, server, tool, "import")

    def _proxy(self, node, server, tool, via):
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        dynamic = any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args)
        self._add(node, server, tool, via, keywords, dynamic, positional=len(node.args))

    def _call_tool(self, node):
        named = {k.arg: k.value for k in node.keywords if k.arg is not None}
        given = list(node.args) + [None] * 3
        server = _literal_str(given[0] if given[0] is not None else named.get("server"))
        tool = _literal_str(given[1] if given[1] is not None else named.get("tool"))
        if server is None or tool is None:
            return
        arguments = given[2] if given[2] is not None else named.get("arguments")
        keywords, dynamic = _argument_names(arguments)
        self._add(node, server, tool, "call_tool", keywords, dynamic)

    def _add(self, node, server, tool, via, keywords, dynamic, positional=0):
        call = {"line": node.lineno, "server": server, "tool": tool, "via": via, "keywords": keywords}
        if dynamic:
            call["dynamic"] = True
        if positional:
            call["positional"] = positional
        self.calls.append(call)


def _argument_names(node):
    """The keys of a literal arguments dict (or dict(...) call); dynamic when they can't be read."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return [], False
    if isinstance(node, ast.Dict):
        keys = [_literal_str(key) if key is not None else None for key in node.keys]
        return [k for k in keys if k is not None], any(k is None for k in keys)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        names = [k.arg for k in node.keywords if k.arg is not None]
        return names, len(names) != len(node.keywords)
    return [], True


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
