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
import json
import math

MAX_CALLS = 10_000
MAX_VALUE_CHARS = 65_536
"""Most characters of literal argument values kept per call; a larger value is left unknown."""
MAX_DEPTH = 200
"""Deeper nesting is not walked (the compiler refuses far less already); calls there are not found."""

_REBINDERS = {"globals", "locals", "vars", "exec", "eval", "__import__", "setattr", "delattr"}
"""Calls that can bind or unbind names where `ast` can't see it."""
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_AWAIT_WRAPPERS = {"gather", "wait_for", "shield"}
"""Awaited calls whose awaitable arguments' exceptions propagate (gather unless return_exceptions)."""
_RUNNERS = {"run", "run_until_complete"}
"""Calls that run a coroutine to completion and raise what it raised."""

_UNKNOWN = None
"""A literal part that can't be read (a name, a call, an f-string) travels as None: None is never judged."""


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
        if _called_name(func) == "add_server":
            self.adds_servers = True
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
            i = _awaited_at(chain, i)
            if i is None:
                return False
        while i > 0:
            parent, child = chain[i - 1], chain[i]
            if _guards(parent, child, names):
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
              and not any(isinstance(a, ast.ClassDef) for a in ancestors) and not _is_generator(function))
        if ok:
            is_async = isinstance(function, ast.AsyncFunctionDef)
            ok = all(self._propagates(c, a, is_async, {name}) for c, a in calls)
        self._judged[key] = ok
        return ok


def _awaited_at(chain, i):
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
            name = _called_name(parent.func)
            if name in _AWAIT_WRAPPERS and (name == "gather" or parent.args[0] is child) and _raises(parent):
                child, j = parent, j - 1
                continue
            if name in _RUNNERS and parent.args and parent.args[0] is child:
                return j
        return None
    return None


def _raises(call):
    """A gather whose exceptions propagate: no return_exceptions, or return_exceptions=False."""
    for keyword in call.keywords:
        if keyword.arg == "return_exceptions":
            return isinstance(keyword.value, ast.Constant) and keyword.value.value is False
        if keyword.arg is None:
            return False
    return True


def _guards(parent, child, names):
    """Whether `parent` may handle or avoid a failure in its part `child`."""
    if isinstance(parent, (ast.Try, ast.TryStar)):
        return bool(parent.handlers) and child in parent.body
    if isinstance(parent, (ast.With, ast.AsyncWith)):
        return child in parent.body and any(_called_name(item.context_expr) == "suppress" for item in parent.items)
    if isinstance(parent, (ast.If, ast.While, ast.IfExp)):
        return child is not parent.test and bool(_strings(parent.test) & names)
    if isinstance(parent, ast.BoolOp):
        before = parent.values[:parent.values.index(child)] if child in parent.values else []
        return any(_strings(value) & names for value in before)
    if isinstance(parent, ast.comprehension):
        return False
    if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return any(_strings(test) & names for generator in parent.generators for test in generator.ifs)
    return False


def _is_generator(function):
    for node in ast.walk(function):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
    return False


def _called_name(node):
    """`suppress` for suppress(...), contextlib.suppress(...); the called attribute or name."""
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _base_of(node):
    """The name a `<x>.call_tool` depends on: `runtime`, or `mcp.runtime`; None otherwise."""
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
