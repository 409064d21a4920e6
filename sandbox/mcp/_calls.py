"""The MCP tool calls a program writes with literal names, read with `ast` (never run).

Found: `mcp_<alias>.<tool>(...)`, `mcp_servers["name"].<tool>(...)`, `call_tool("server", "tool", {...})`
(bare or as an attribute, e.g. `runtime.call_tool`), tools imported with `from mcp.servers.<alias> import
<tool>`, and functions of skills imported with `from skills import <name>` or `from skills.<name> import
<function>`. Each call carries where it is (line, 1-based column), its keyword names, the values of those
that are literals, how many positional arguments it has, whether any argument is dynamic (`*args`,
`**kwargs`, a non-literal arguments dict), the name its resolution depends on (`base`), and whether it
is guarded: inside a `try` with handlers, a `with suppress(...)`, or a branch whose condition names the
tool or server (`if "x" in dir(mcp_s)`), where a failure may be what the program expects.

Used by the skill drift check (_skill_code.py) and the pre-run check (_precheck.py), which decides what
of this is certain.
"""
import ast
import json
import math

MAX_CALLS = 10_000
MAX_VALUE_CHARS = 65_536
"""Most characters of literal argument values kept per call; a larger value is left unknown."""

_REBINDERS = {"globals", "locals", "vars", "exec", "eval", "__import__", "setattr", "delattr"}
"""Calls that can bind or unbind names where `ast` can't see it."""

_UNKNOWN = None
"""A literal part that can't be read (a name, a call, an f-string) travels as None: None is never judged."""


def find(tree, source=""):
    """{"calls": [...], "imports": [...], "skills": [...], "names": {...}} for a parsed program."""
    finder = CallFinder(source)
    finder.visit(tree)
    return finder


class CallFinder(ast.NodeVisitor):
    """Collects calls, imports of servers and skills, and every name the program binds."""

    def __init__(self, source=""):
        self._lines = source.encode("utf-8", "surrogatepass").split(b"\n") if source else []
        self.calls = []
        self.imports = []
        """`from mcp.servers.<alias> import ...` statements: {line, col, server}."""
        self.skill_imports = []
        """`from skills import <name>` / `from skills.<name> import <function>`: {line, col, skill, names}."""
        self.imported = {}
        """local name -> ("tool", server alias, tool) or ("skill", skill, None) or ("function", skill, function)."""
        self.bound = {}
        """Every name the program binds anywhere (assignment, import, def, parameter, ...) -> how many times."""
        self.dynamic_names = False
        """True when the program can bind names in ways `ast` can't follow (exec, globals(), import *)."""
        self.adds_servers = False
        """True when the program calls add_server: servers it adds are not known before it runs."""
        self._guards = []

    # Bindings.

    def _bind(self, name):
        self.bound[name] = self.bound.get(name, 0) + 1

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node.id)
        elif node.id == "__builtins__":
            self.dynamic_names = True

    def visit_Attribute(self, node):
        if node.attr in ("__dict__", "__builtins__", "modules") or node.attr.startswith("__setattr"):
            self.dynamic_names = True
        self.generic_visit(node)

    def visit_Global(self, node):
        for name in node.names:
            self._bind(name)

    visit_Nonlocal = visit_Global

    def _visit_function(self, node):
        self._bind(node.name)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                    node.args.vararg, node.args.kwarg]:
            if arg is not None:
                self._bind(arg.arg)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def visit_Lambda(self, node):
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                    node.args.vararg, node.args.kwarg]:
            if arg is not None:
                self._bind(arg.arg)
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        self._bind(node.name)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node):
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node):
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node):
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node):
        if node.rest:
            self._bind(node.rest)
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            self._bind(alias.asname or alias.name.split(".")[0])
            if alias.name == "builtins":
                self.dynamic_names = True

    def visit_ImportFrom(self, node):
        module = node.module or ""
        where = self._where(node)
        if node.level == 0 and module.startswith("mcp.servers.") and module.count(".") == 2:
            server = module.split(".")[2]
            self.imports.append({**where, "server": server})
            for name in node.names:
                if name.name != "*":
                    self.imported[name.asname or name.name] = ("tool", server, name.name)
        elif node.level == 0 and module == "skills":
            for name in node.names:
                if name.name != "*":
                    self.skill_imports.append({**where, "skill": name.name})
                    self.imported[name.asname or name.name] = ("skill", name.name, None)
        elif node.level == 0 and module.startswith("skills.") and module.count(".") == 1:
            skill = module.split(".")[1]
            self.skill_imports.append({**where, "skill": skill})
            for name in node.names:
                if name.name != "*":
                    self.imported[name.asname or name.name] = ("function", skill, name.name)
        for name in node.names:
            if name.name == "*":
                self.dynamic_names = True
            else:
                self._bind(name.asname or name.name)

    # Guards: where a failing call may be what the program expects.

    def visit_Try(self, node):
        if node.handlers:
            self._guards.append(True)
            for child in node.body:
                self.visit(child)
            self._guards.pop()
        else:
            for child in node.body:
                self.visit(child)
        for child in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(child)

    visit_TryStar = visit_Try

    def _visit_with(self, node):
        for item in node.items:
            self.visit(item)
        suppressing = any(_called_name(item.context_expr) == "suppress" for item in node.items)
        self._guards.append(True if suppressing else None)
        for child in node.body:
            self.visit(child)
        self._guards.pop()

    visit_With = visit_AsyncWith = _visit_with

    def _visit_branches(self, node):
        self.visit(node.test)
        self._guards.append(_strings(node.test))
        for child in [*_as_list(node.body), *_as_list(node.orelse)]:
            self.visit(child)
        self._guards.pop()

    visit_If = visit_While = visit_IfExp = _visit_branches

    def visit_BoolOp(self, node):
        self.visit(node.values[0])
        pushed = 0
        for value in node.values[1:]:
            self._guards.append(_strings(node.values[pushed]))
            pushed += 1
            self.visit(value)
        del self._guards[len(self._guards) - pushed:]

    def _visit_comprehension(self, node):
        for generator in node.generators:
            self.visit(generator)
        tests = set()
        for generator in node.generators:
            for test in generator.ifs:
                tests |= _strings(test)
        self._guards.append(tests)
        for child in ("elt", "key", "value"):
            if hasattr(node, child):
                self.visit(getattr(node, child))
        self._guards.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension

    def _guarded(self, *names):
        for guard in self._guards:
            if guard is True or (isinstance(guard, set) and guard & set(filter(None, names))):
                return True
        return False

    # Calls.

    def visit_Call(self, node):
        if len(self.calls) < MAX_CALLS:
            self._record(node)
        self.generic_visit(node)

    def _record(self, node):
        func = node.func
        name = _called_name(func)
        if name == "add_server":
            self.adds_servers = True
        if isinstance(func, ast.Name) and func.id in _REBINDERS:
            self.dynamic_names = True
        if isinstance(func, ast.Attribute):
            target, attribute = func.value, func.attr
            if attribute.startswith("_"):
                return
            if isinstance(target, ast.Name) and target.id.startswith("mcp_") and target.id != "mcp_servers":
                self._proxy(node, target.id[4:], attribute, "proxy", target.id)
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id == "mcp_servers":
                server = _literal_str(target.slice)
                if server is not None:
                    self._proxy(node, server, attribute, "servers", "mcp_servers")
            elif attribute == "call_tool":
                self._call_tool(node, _base_of(target))
            elif isinstance(target, ast.Name) and self.imported.get(target.id, ("",))[0] == "skill":
                self._skill(node, self.imported[target.id][1], attribute, target.id)
        elif isinstance(func, ast.Name):
            if func.id == "call_tool":
                self._call_tool(node, "call_tool")
            elif func.id in self.imported:
                kind, first, second = self.imported[func.id]
                if kind == "tool":
                    self._proxy(node, first, second, "import", func.id)
                elif kind == "function":
                    self._skill(node, first, second, func.id)

    def _proxy(self, node, server, tool, via, base):
        keywords, values, dynamic = _keywords(node.keywords)
        dynamic = dynamic or any(isinstance(a, ast.Starred) for a in node.args)
        self._add(node, server, tool, via, base, keywords, values, dynamic, positional=len(node.args))

    def _call_tool(self, node, base):
        named = {k.arg: k.value for k in node.keywords if k.arg is not None}
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return
        given = list(node.args) + [None] * 3
        server = _literal_str(given[0] if given[0] is not None else named.get("server"))
        tool = _literal_str(given[1] if given[1] is not None else named.get("tool"))
        if server is None or tool is None:
            return
        arguments = given[2] if given[2] is not None else named.get("arguments")
        keywords, values, dynamic = _argument_names(arguments)
        self._add(node, server, tool, "call_tool", base, keywords, values, dynamic)

    def _skill(self, node, skill, function, base):
        keywords, _, dynamic = _keywords(node.keywords)
        dynamic = dynamic or any(isinstance(a, ast.Starred) for a in node.args)
        call = {**self._where(node), "skill": skill, "function": function, "via": "skill", "base": base,
                "keywords": keywords, "positional": len(node.args), "dynamic": dynamic}
        if self._guarded(skill, function):
            call["guarded"] = True
        self.calls.append(call)

    def _add(self, node, server, tool, via, base, keywords, values, dynamic, positional=0):
        call = {**self._where(node), "server": server, "tool": tool, "via": via, "base": base,
                "keywords": keywords}
        if values:
            call["values"] = values
        if dynamic:
            call["dynamic"] = True
        if positional:
            call["positional"] = positional
        if self._guarded(server, tool, f"mcp_{server}"):
            call["guarded"] = True
        self.calls.append(call)

    def _where(self, node):
        line, offset = node.lineno, node.col_offset
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else b""
        return {"line": line, "col": len(text[:offset].decode("utf-8", "replace")) + 1}


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _called_name(node):
    """`suppress` for suppress(...), contextlib.suppress(...); the called attribute or name."""
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _base_of(node):
    """The name a `<x>.call_tool` depends on: `runtime`, or `mcp` for `mcp.runtime`; None otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and node.attr == "runtime" and isinstance(node.value, ast.Name) \
            and node.value.id == "mcp":
        return "mcp.runtime"
    return None


def _strings(node):
    """The string constants in an expression (what a guard like `"x" in dir(mcp_s)` names)."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _keywords(keywords):
    """(names, literal values, dynamic) of a call's keyword arguments; `**{"a": 1}` counts as `a=1`."""
    names, values, dynamic = [], {}, False
    for keyword in keywords:
        if keyword.arg is not None:
            names.append(keyword.arg)
            _keep(values, keyword.arg, keyword.value)
            continue
        spread, spread_values, spread_dynamic = _argument_names(keyword.value)
        names += spread
        values.update(spread_values)
        dynamic = dynamic or spread_dynamic
    return names, values, dynamic


def _argument_names(node):
    """(keys, literal values, dynamic) of a literal arguments dict (or dict(...) call)."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return [], {}, False
    if isinstance(node, ast.Dict):
        names, values, dynamic = [], {}, False
        for key, value in zip(node.keys, node.values):
            name = _literal_str(key) if key is not None else None
            if name is None:
                dynamic = True
                continue
            names.append(name)
            _keep(values, name, value)
        return names, values, dynamic
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return _keywords(node.keywords)
    return [], {}, True


def _keep(values, name, node):
    value = literal(node)
    if value is not _UNKNOWN:
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            return
        if len(text) <= MAX_VALUE_CHARS:
            values[name] = value


def literal(node, depth=0):
    """The JSON value a literal argument sends, with None for any part that can't be read."""
    if depth > 20:
        return _UNKNOWN
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value)):
            return value
        return _UNKNOWN
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = literal(node.operand, depth + 1)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
        return _UNKNOWN
    if isinstance(node, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return _UNKNOWN
        return [literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        result = {}
        for key, value in zip(node.keys, node.values):
            name = _literal_str(key) if key is not None else None
            if name is None:
                return _UNKNOWN  # a ** spread or a non-string key: the keys are not all known
            result[name] = literal(value, depth + 1)
        return result
    return _UNKNOWN


def _literal_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
