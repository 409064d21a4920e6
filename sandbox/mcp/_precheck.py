"""The pre-run check: before a run_python program runs, the tool calls it writes with literal names are
checked against the servers' tools, their schemas and the policy, and skill functions against their
definitions. When any finding is certain, nothing runs: the result lists each finding with its line,
column and a one-line fix.

Certain means the call fails whenever it is made, and the failure reaches the top of the program (see
_calls.py: awaited, not in a `try` with handlers, a lambda, a function not certainly called, ...). So a
call is also left alone when what it names could be something else at run time: a name the program binds
itself (`mcp_x = ...`), one bound in an earlier run (only codemode's own globals are relied on), a
program that binds names where `ast` can't follow (exec, globals(), `import *`), servers the program adds
(`runtime.add_server`), a computed name, `**kwargs` (for what it may hold). Which servers, tools and
arguments exist is the host's word (core/host_api/check.ts); this side resolves the names.

`# codemode: nocheck` on a program's first line, or CODEMODE_PRECHECK=off, skips the check.
"""
import ast
import sys

from codemode_runtime import context

from . import _calls, _plan, _proxy

NOCHECK = "# codemode: nocheck"
_MARKERS = ("mcp", "call_tool", "skills")
MAX_FINDINGS = 50
"""Findings the text lists."""
MAX_STRUCTURED = 200
"""Findings structuredContent.check lists (the host keeps no more: core/sandbox/run_result.ts)."""
_MODULE_ATTRIBUTES = {"__name__", "__doc__", "__file__", "__loader__", "__spec__", "__package__",
                      "__builtins__", "__dict__", "__path__", "__cached__"}


class Gate:
    """The executor's `prepare` hook: the check, then the rewrite of `runtime.plan` blocks."""

    def cell(self, source, tree):
        """The tree to compile, or the Outcome of a program the check stopped."""
        from codemode_runtime.executor import Outcome

        found = findings(source, tree)
        if found:
            structured = [{k: f[k] for k in ("line", "col", "kind", "message", "fix") if k in f}
                          for f in found[:MAX_STRUCTURED]]
            return Outcome("error", error=report(found), check=structured)
        return _plan.rewrite(tree)

    def syntax_error(self, source, error):
        """The structured finding of a program that does not compile (its text stays Python's own)."""
        return [syntax_finding(error)] if enabled_for(source) else None


def enabled_for(source):
    """Whether the check applies to this program (setting on, no `# codemode: nocheck` first line)."""
    if context.current().config.get("precheck") == "off":
        return False
    first = source.lstrip("\ufeff").split("\n", 1)[0].strip()
    return first.replace(" ", "").lower() != NOCHECK.replace(" ", "")


def findings(source, tree):
    """The certain findings of a parsed program, each {line, col, kind, message, fix}, in source order."""
    if not enabled_for(source) or not context.current().rpc.can_block():
        return []  # off, or a transport that cannot wait for the host's answer here
    if not any(marker in source for marker in _MARKERS):
        return []  # no tool call or skill can be written without one of these words
    found = _calls.find(tree, source)
    if found.dynamic_names:
        return []
    kernel = context.current()
    resolver = _Resolver(found, kernel)
    calls = []
    for call in found.calls:
        if not call.get("certain") or call["via"] == "skill":
            continue
        resolved = resolver.call(call)
        if resolved is not None:
            calls.append(resolved)
    for statement in found.imports:
        if statement.get("certain") and not resolver.server_module(statement["server"]) \
                and not found.adds_servers:
            calls.append({**statement, "tool": "", "via": "import", "unbound": True, "import_only": True})
    result = _skill_findings(found, resolver, kernel)
    if calls:
        try:
            # A program that adds servers is checked against the configured ones alone: what it adds may
            # replace a server the session added before, under the same alias.
            answer = kernel.rpc.call_sync("check_calls", {"calls": calls, "adds_servers": found.adds_servers})
        except Exception:  # a check the host can't make must not stop the program
            answer = {}
        result += [f for f in (answer or {}).get("findings") or [] if isinstance(f, dict)]
    lines = source.split("\n")
    for finding in result:
        finding["source"] = _source_line(lines, finding.get("line"))
    return sorted(result, key=lambda f: (f.get("line") or 0, f.get("col") or 0))


def syntax_finding(error):
    """The finding for a program that does not compile."""
    line = getattr(error, "lineno", None) or 0
    col = getattr(error, "offset", None) or 0
    message = f"{type(error).__name__}: {getattr(error, 'msg', None) or error}"
    return {"line": line, "col": col, "kind": "syntax", "message": message,
            "fix": f"correct the syntax at line {line}, column {col}, where the caret points"}


def report(found):
    """The error text of a program the check stopped: each finding with its line, column, code and fix."""
    count = len(found)
    lines = [f"The pre-run check found {count} problem{'s' if count != 1 else ''}, so nothing ran:"]
    for finding in found[:MAX_FINDINGS]:
        lines.append(f"  line {finding.get('line')}, col {finding.get('col')}: {finding.get('message')} "
                     f"[{finding.get('kind')}]")
        text = finding.get("source")
        if text:
            stripped = text.lstrip()
            caret = max(0, (finding.get("col") or 1) - 1 - (len(text) - len(stripped)))
            lines += [f"      {stripped}", f"      {' ' * caret}^"]
        if finding.get("fix"):
            lines.append(f"    fix: {finding['fix']}")
    if count > MAX_FINDINGS:
        lines.append(f"  ... and {count - MAX_FINDINGS} more (structuredContent.check lists up to {MAX_STRUCTURED})")
    lines.append("Nothing was called. Fix these and run again; if a finding is wrong, `# codemode: nocheck` "
                 "as the first line skips the check.")
    return "\n".join(lines) + "\n"


def _source_line(lines, number):
    if not isinstance(number, int) or not 0 < number <= len(lines):
        return None
    text = lines[number - 1].rstrip()
    return text if len(text) <= 200 else text[:200] + "…"


class _Resolver:
    """What the names a call depends on are, where that is certain."""

    def __init__(self, found, kernel):
        self.found = found
        self.namespace = kernel.namespace
        self.api = kernel.api
        self.runtime = sys.modules.get("mcp.runtime")

    def _free(self, name):
        """Not bound by the program itself."""
        return name not in self.found.bound

    def _only_import(self, name):
        """Bound exactly once, by the import the finder recorded."""
        return self.found.bound.get(name) == 1 and name in self.found.imported

    def _current(self, name):
        """What a name the program does not bind is when the program starts: codemode's own global (a
        proxy, mcp_servers, the mcp package) or _MISSING when nothing has the name; _OTHER when an earlier
        run (or builtins) bound it to anything else, which the check never relies on."""
        own = self.api.get(name, sys.modules.get("mcp") if name == "mcp" else _MISSING)
        builtins = self.namespace.get("__builtins__")
        builtins = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        value = self.namespace.get(name, builtins.get(name, _MISSING))
        if value is _MISSING or value is own:
            return value
        return _OTHER

    def server_module(self, alias):
        module = sys.modules.get(f"mcp.servers.{alias}")
        proxy = getattr(module, "__dict__", {}).get("__codemode_server__")
        return proxy._ServerProxy__state.name if isinstance(proxy, _proxy.ServerProxy) else None

    def call(self, call):
        via = call["via"]
        if via == "proxy":
            return self._proxy_call(call)
        if via == "servers":
            return self._servers_call(call)
        if via == "call_tool":
            return self._call_tool(call)
        if via == "import":
            if not self._only_import(call["base"]):
                return None
            name = self.server_module(call["server"])
            return _bridge_list_tools(call) or (None if name is None else {**call, "server": name})
        return None

    def _proxy_call(self, call):
        base = call["base"]
        if not self._free(base):
            return None
        value = self._current(base)
        if value is _MISSING:
            return None if self.found.adds_servers else {**call, "unbound": True}
        if not isinstance(value, _proxy.ServerProxy) or _bridge_list_tools(call):
            return None  # bound to something else (_OTHER), or the bridge's list_tools()
        return {**call, "server": value._ServerProxy__state.name}

    def _servers_call(self, call):
        if not self._free("mcp_servers") or self._current("mcp_servers") is not self.api.get("mcp_servers"):
            return None
        if call["server"] not in self.api["mcp_servers"]:
            return None if self.found.adds_servers else {**call, "unbound": True}
        return None if _bridge_list_tools(call) else call

    def _call_tool(self, call):
        base = call["base"]
        if base == "mcp.runtime":
            ok = self._is("mcp", "mcp", sys.modules.get("mcp"))
        elif base == "call_tool":
            ok = self._is(base, "mcp.runtime.call_tool", getattr(self.runtime, "call_tool", None))
        elif isinstance(base, str):
            ok = self._is(base, "mcp.runtime", self.runtime)
        else:
            ok = False
        if not ok:
            return None
        proxy = _proxy.proxy_for(call["server"])
        if proxy is None:
            return None if self.found.adds_servers else {**call, "unbound": True}
        return {**call, "server": proxy._ServerProxy__state.name}

    def _is(self, name, imported, current):
        """Whether `name` certainly is `current`: imported as `imported` by the program, or codemode's own
        global of that name (`mcp`); a name an earlier run bound is not relied on."""
        if self._free(name):
            return current is not None and self._current(name) is current
        return self.found.bound.get(name) == 1 and self.found.module_imports.get(name) == imported


def _bridge_list_tools(call):
    """`mcp_x.list_tools()` with no arguments lists the tools (as the bridge's proxies did)."""
    return call["tool"] == "list_tools" and not call.get("keywords") and not call.get("positional") \
        and not call.get("dynamic")


_MISSING = object()
_OTHER = object()


def _skill_findings(found, resolver, kernel):
    """Unknown skills, unknown skill functions, and calls their definitions certainly refuse."""
    imports = [s for s in found.skill_imports if s.get("certain")]
    calls = [c for c in found.calls if c["via"] == "skill" and c.get("certain")
             and resolver._only_import(c["base"])]
    if found.saves_skills:  # a skill it saves (or saves again, changed) is only known once it has run
        return []
    if not imports and not calls:
        return []
    try:
        entries = kernel.rpc.call_sync("list_skills", {})
    except Exception:  # skills are off or the host can't say: the import fails on its own
        return []
    skills = {}
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("module") and "/" not in str(entry.get("name", "")):
            for spelling in (entry["module"], entry["name"], str(entry["name"]).replace("-", "_")):
                skills[spelling] = entry
    result = []
    for statement in imports:
        if statement["skill"] not in skills:
            known = sorted({e["module"] for e in skills.values()})
            result.append({"line": statement["line"], "col": statement["col"], "kind": "unknown-skill",
                           "message": f"no skill named {statement['skill']!r} (saved: {_names(known)})",
                           "fix": "await runtime.list_skills() lists the skills; save one with runtime.save_skill"})
    for call in calls:
        entry = skills.get(call["skill"])
        shape = _skill_shape(entry, kernel) if entry else None
        if shape is None:
            continue
        problem = _function_problem(call, shape)
        if problem:
            result.append({"line": call["line"], "col": call["col"], **problem})
    return result


_shapes = {}  # code digest -> shape of the skill module (its top-level names and plain functions)


def _skill_shape(entry, kernel):
    """{names: set, functions: {name: ast.arguments}} of a skill's module; None when it can't be certain."""
    digest = entry.get("digest")
    if not entry.get("has_code") or not digest:
        return None
    if digest not in _shapes:
        try:
            code = kernel.rpc.call_sync("read_skill", {"name": entry["name"]}).get("code") or ""
            _shapes[digest] = _module_shape(ast.parse(code))
        except Exception:
            _shapes[digest] = None
    shape = _shapes[digest]
    if shape is not None:
        shape = {**shape, "names": shape["names"] | set(kernel.api) | _MODULE_ATTRIBUTES}
    return shape


def _module_shape(tree):
    found = _calls.find(tree)
    if found.dynamic_names:
        return None
    names = set()
    functions = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__getattr__":
            return None  # attributes are computed
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    for node in tree.body:
        for target in _top_level_names(node):
            names.add(target)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list:
            functions[node.name] = node.args
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            functions.pop(node.name, None)
    # A name bound again at the top (x = other) is not the def's any more.
    for name in list(functions):
        if found.bound.get(name, 0) > 1:
            del functions[name]
    return {"names": names, "functions": functions}


def _top_level_names(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)] + \
        [n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _function_problem(call, shape):
    """The one problem a call of a skill function certainly has, as finding fields, or None."""
    skill, function = call["skill"], call["function"]
    if function not in shape["names"]:
        public = sorted(n for n in shape["functions"] if not n.startswith("_"))
        return {"kind": "unknown-function",
                "message": f"skill {skill!r} has no function {function!r} (it has: {_names(public)})",
                "fix": f"await runtime.read_skill({skill!r}) shows its code"}
    args = shape["functions"].get(function)
    if args is None or call.get("dynamic"):
        return None
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    keyword_names = {a.arg for a in [*args.args, *args.kwonlyargs]}
    given = call.get("keywords") or []
    if call.get("positional", 0) > len(positional) and args.vararg is None:
        return {"kind": "positional",
                "message": f"{function}() of skill {skill!r} takes {len(positional)} positional argument(s), "
                           f"{call['positional']} given",
                "fix": f"pass the others by keyword: {function}({ast.unparse(args)})"}
    if args.kwarg is None:
        for name in given:
            if name not in keyword_names:
                return {"kind": "unknown-argument",
                        "message": f"{function}() of skill {skill!r} takes no argument {name!r}",
                        "fix": f"its signature is {function}({ast.unparse(args)})"}
    filled = set(positional[:call.get("positional", 0)]) | set(given)
    defaults = len(args.defaults)
    required = positional[:len(positional) - defaults] if defaults else positional
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    missing = [name for name in required if name not in filled]
    if missing:
        return {"kind": "missing-argument",
                "message": f"{function}() of skill {skill!r} needs the argument {missing[0]!r}",
                "fix": f"its signature is {function}({ast.unparse(args)})"}
    return None


def _names(names):
    names = list(names)
    if not names:
        return "none"
    return ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
