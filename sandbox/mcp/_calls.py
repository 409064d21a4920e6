"""The MCP tool calls a program writes with literal names, read with `ast` (never run).

Found: `mcp_<alias>.<tool>(...)`, `mcp_servers["name"].<tool>(...)`, `call_tool("server", "tool", {...})`
(bare or as an attribute, e.g. `runtime.call_tool`), tools imported with `from mcp.servers.<alias> import
<tool>`, and functions of skills imported with `from skills import <name>` or `from skills.<name> import
<function>`. Each call carries where it is (line, 1-based column), its keyword names, the values of those
that are literals, how many positional arguments it has, whether any argument is dynamic (`*args`,
`**kwargs`, a non-literal arguments dict), and the name its resolution depends on (`base`).

Each call also says whether its failure would certainly reach the top of the program (`certain`): the
call is awaited (directly, or through `asyncio.gather` without `return_exceptions`, `wait_for`, `shield`,
`asyncio.run`), not inside a `try` with handlers, a `with suppress(...)`, or a branch whose condition names
the tool or server (`if "x" in dir(mcp_s)`), and not in a lambda, a method, a generator or a function the
program does not certainly call the same way. Loops and branches that may not run do not make a call
uncertain: when it runs, it fails.

Used by the skill drift check (_skill_code.py) and the pre-run check (_precheck.py).
"""
import ast

from ._certainty import awaited_at, called_name, guards, is_generator
from ._literals import argument_names, keywords as keyword_arguments, literal_str

MAX_CALLS = 10_000
MAX_DEPTH = 200
"""Deeper nesting is not walked (the compiler refuses far less already); calls there are not found."""

_REBINDERS = {"globals", "locals", "vars", "exec", "eval", "__import__", "setattr", "delattr"}
"""Calls that can bind or unbind names where `ast` can't see it."""


def find(tree, source=""):
    """The calls, imports and bindings of a parsed program (a CallFinder after its walk)."""
    finder = CallFinder(source)
    finder.visit(tree)
    finder.settle()
    return finder


class CallFinder(ast.NodeVisitor):
    """Collects calls, imports of servers and skills, and every name the program binds."""

    def __init__(self, source=""):
        self._lines = source.encode("utf-8", "surrogatepass").split(b"\n") if source else []
        self.calls = []
        self.imports = []
        """`from mcp.servers.<alias> import ...` statements: {line, col, server, certain}."""
        self.skill_imports = []
        """`from skills import <name>`, `from skills.<name> import ...`: {line, col, skill, certain}."""
        self.imported = {}
        """local name -> ("tool", server alias, tool) or ("skill", skill, None) or ("function", skill, function)."""
        self.module_imports = {}
        """local name -> the dotted name an import binds to it (`from mcp import runtime` -> mcp.runtime)."""
        self.bound = {}
        """Every name the program binds anywhere (assignment, import, def, parameter, ...) -> how many times."""
        self.dynamic_names = False
        """True when the program can bind names in ways `ast` can't follow (exec, globals(), import *)."""
        self.adds_servers = False
        """True when the program calls add_server: servers it adds are not known before it runs."""
        self.saves_skills = False
        """True when the program calls save_skill: skills it saves are not known before it runs."""
        self._stack = []
        self._pending = []  # (record, ancestors, node, awaited, names) to judge once the walk is done
        self._defs = {}  # function name -> (def node, its ancestors)
        self._called = {}  # function name -> [(call node, ancestors)]
        self._escaped = set()  # names used other than as the function of a call
        self._func_names = set()  # id() of Name nodes that are the function of a call
        self._judged = {}
        self._dispatch = {}

    def visit(self, node):
        # ast.NodeVisitor's own visit and generic_visit, made cheaper: this walk is on every run's path.
        stack = self._stack
        if len(stack) >= MAX_DEPTH:
            self.dynamic_names = True  # what lies deeper is not seen: nothing about names is certain
            return
        cls = node.__class__
        method = self._dispatch.get(cls)
        if method is None:
            method = self._dispatch[cls] = getattr(self, "visit_" + cls.__name__, self.generic_visit)
        stack.append(node)
        try:
            method(node)
        finally:
            stack.pop()

    def generic_visit(self, node):
        for field in node._fields:
            value = getattr(node, field, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST) and not isinstance(value, ast.expr_context):
                self.visit(value)

    def visit_Constant(self, node):
        pass

    # Bindings.

    def _bind(self, name):
        self.bound[name] = self.bound.get(name, 0) + 1

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node.id)
        else:
            if node.id == "__builtins__":
                self.dynamic_names = True
            if id(node) not in self._func_names:
                self._escaped.add(node.id)

    def visit_Attribute(self, node):
        if node.attr in ("__dict__", "__builtins__", "modules"):
            self.dynamic_names = True
        self.generic_visit(node)

    def visit_Global(self, node):
        for name in node.names:
            self._bind(name)

    visit_Nonlocal = visit_Global

    def _visit_function(self, node):
        self._bind(node.name)
        if node.name in self._defs:
            self._defs[node.name] = None  # defined twice: which one runs is not certain
        else:
            self._defs[node.name] = (node, list(self._stack[:-1]))
        self._bind_arguments(node.args)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def visit_Lambda(self, node):
        self._bind_arguments(node.args)
        self.generic_visit(node)

    def _bind_arguments(self, args):
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self._bind(arg.arg)

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
            local = alias.asname or alias.name.split(".")[0]
            self._bind(local)
            self.module_imports[local] = alias.name if alias.asname else local
            if alias.name == "builtins":
                self.dynamic_names = True

    def visit_ImportFrom(self, node):
        module = node.module or ""
        names = [name.name for name in node.names if name.name != "*"]
        where = self._where(node)
        parts = module.split(".")
        if node.level == 0:
            for name in node.names:
                self.module_imports[name.asname or name.name] = f"{module}.{name.name}"
            if parts[:2] == ["mcp", "servers"] and len(parts) == 3:
                self._judge({**where, "server": parts[2]}, self.imports, node, False, {parts[2], *names})
                self._importing(node, lambda name: ("tool", parts[2], name))
            elif module == "skills":
                for name in names:
                    self._judge({**where, "skill": name}, self.skill_imports, node, False, {name})
                self._importing(node, lambda name: ("skill", name, None))
            elif parts[0] == "skills" and len(parts) == 2:
                self._judge({**where, "skill": parts[1]}, self.skill_imports, node, False, {parts[1], *names})
                self._importing(node, lambda name: ("function", parts[1], name))
        for name in node.names:
            if name.name == "*":
                self.dynamic_names = True
            else:
                self._bind(name.asname or name.name)

    def _importing(self, node, what):
        """Remembers what each name a `from ... import` binds is: what(imported name)."""
        for name in node.names:
            if name.name != "*":
                self.imported[name.asname or name.name] = what(name.name)

    # Calls.

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name):
            self._func_names.add(id(func))
            self._called.setdefault(func.id, []).append((node, list(self._stack[:-1])))
            if func.id in _REBINDERS:
                self.dynamic_names = True
        if called_name(func) == "add_server":
            self.adds_servers = True
        if called_name(func) == "save_skill":
            self.saves_skills = True
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
                self._proxy(node, target.id[4:], attribute, "proxy", target.id)
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id == "mcp_servers":
                server = literal_str(target.slice)
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
        keywords, values, dynamic = keyword_arguments(node.keywords)
        dynamic = dynamic or any(isinstance(a, ast.Starred) for a in node.args)
        self._add(node, server, tool, via, base, keywords, values, dynamic, positional=len(node.args))

    def _call_tool(self, node, base):
        named = {k.arg: k.value for k in node.keywords if k.arg is not None}
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return
        given = list(node.args) + [None] * 3
        server = literal_str(given[0] if given[0] is not None else named.get("server"))
        tool = literal_str(given[1] if given[1] is not None else named.get("tool"))
        if server is None or tool is None:
            return
        arguments = given[2] if given[2] is not None else named.get("arguments")
        keywords, values, dynamic = argument_names(arguments)
        self._add(node, server, tool, "call_tool", base, keywords, values, dynamic)

    def _skill(self, node, skill, function, base):
        keywords, _, dynamic = keyword_arguments(node.keywords)
        dynamic = dynamic or any(isinstance(a, ast.Starred) for a in node.args)
        call = {**self._where(node), "skill": skill, "function": function, "via": "skill", "base": base,
                "keywords": keywords, "positional": len(node.args), "dynamic": dynamic}
        # Arguments are bound when the function is called, awaited or not.
        self._judge(call, self.calls, node, False, {skill, function})

    def _add(self, node, server, tool, via, base, keywords, values, dynamic, positional=0):
        call = {**self._where(node), "server": server, "tool": tool, "via": via, "base": base,
                "keywords": keywords}
        if values:
            call["values"] = values
        if dynamic:
            call["dynamic"] = True
        if positional:
            call["positional"] = positional
        self._judge(call, self.calls, node, True, {server, tool, f"mcp_{server}"})

    def _judge(self, record, into, node, awaited, names):
        into.append(record)
        self._pending.append((record, list(self._stack[:-1]), node, awaited, names))

    def _where(self, node):
        line, offset = node.lineno, node.col_offset
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else b""
        return {"line": line, "col": len(text[:offset].decode("utf-8", "replace")) + 1}

    # Whether a failure certainly reaches the top of the program.

    def settle(self):
        """Marks each call and import `certain` or not (needs the whole walk: functions' callers)."""
        for record, ancestors, node, awaited, names in self._pending:
            record["certain"] = self._propagates(node, ancestors, awaited, names)
        self._pending = []

    def _propagates(self, node, ancestors, awaited, names):
        chain = ancestors + [node]
        i = len(chain) - 1
        if awaited:
            i = awaited_at(chain, i)
            if i is None:
                return False
        while i > 0:
            parent, child = chain[i - 1], chain[i]
            if guards(parent, child, names):
                return False
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return self._certainly_called(parent, chain[:i - 1])
            if isinstance(parent, (ast.Lambda, ast.ClassDef)):
                return False
            i -= 1
        return True

    def _certainly_called(self, function, ancestors):
        """A function whose body certainly runs when the program does, with its failures unhandled."""
        key = id(function)
        if key in self._judged:
            return self._judged[key]
        self._judged[key] = False  # recursion through itself proves nothing
        name = function.name
        entry = self._defs.get(name)
        calls = [(c, a) for c, a in self._called.get(name, []) if not any(x is function for x in a)]
        ok = (entry is not None and entry[0] is function and not function.decorator_list
              and self.bound.get(name) == 1 and name not in self._escaped and calls
              and not any(isinstance(a, ast.ClassDef) for a in ancestors) and not is_generator(function))
        if ok:
            is_async = isinstance(function, ast.AsyncFunctionDef)
            ok = all(self._propagates(c, a, is_async, {name}) for c, a in calls)
        self._judged[key] = ok
        return ok


def _base_of(node):
    """The name a `<x>.call_tool` depends on: `runtime`, or `mcp.runtime`; None otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and node.attr == "runtime" and isinstance(node.value, ast.Name) \
            and node.value.id == "mcp":
        return "mcp.runtime"
    return None
