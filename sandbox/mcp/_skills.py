"""Skills in the sandbox.

`from skills import <name>` (or `from skills.<name> import <function>`) fetches the skill's code from the
host over the channel on first import (no host directory is mounted) and runs it as a module whose globals
hold the same `mcp_<alias>` proxies as the session, so its tool calls go through the same policy. The
import also sends the calls the code makes (read with `ast`, see _skill_code.py) to the host, whose
drift findings become notes on the run's result. `runtime.save_skill` sends code back, from a string or
from a function or class defined in an earlier cell (the executor keeps every cell's source).
"""
import ast
import asyncio
import importlib
import importlib.machinery
import inspect
import linecache
import sys
import textwrap
import types

from codemode_runtime import context

from . import _plan, _proxy, _skill_code

PACKAGE = "skills"
_functions = {}  # code digest -> public functions (the analysis of code that does not change)


def install():
    """Puts the `skills` importer on sys.meta_path, ahead of anything installed on disk."""
    if not any(isinstance(finder, SkillFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, SkillFinder())


def _rpc():
    return context.current().rpc


class SkillsPackage(types.ModuleType):
    """The `skills` package: its attributes are the saved skills, imported on first use."""

    def __getattr__(self, attribute):
        if attribute.startswith("_"):
            raise AttributeError(f"module {PACKAGE!r} has no attribute {attribute!r}")
        try:
            return importlib.import_module(f"{PACKAGE}.{attribute}")
        except ImportError as error:
            raise error.with_traceback(None) from None  # importlib's frames are not the user's

    def __dir__(self):
        try:
            names = [s["module"] for s in _rpc().call_sync("list_skills", {}) if s.get("module")]
        except Exception:
            names = []
        return sorted(set(self.__dict__) | set(names))


class SkillFinder:
    """Finds `skills` and `skills.<name>`; the code of a skill comes from the host when first imported."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == PACKAGE:
            return importlib.machinery.ModuleSpec(PACKAGE, _PackageLoader(), is_package=True)
        prefix, _, name = fullname.partition(".")
        if prefix != PACKAGE or not name or "." in name or not name.isidentifier():
            return None
        skill = _fetch(fullname, name)
        return importlib.machinery.ModuleSpec(fullname, SkillLoader(skill), origin=_filename(skill["name"]))


class _PackageLoader:
    def create_module(self, spec):
        module = SkillsPackage(PACKAGE, "Saved skills: `from skills import <name>`; runtime.list_skills() lists them")
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


class SkillLoader:
    """Runs one skill's code as the module `skills.<name>`."""

    def __init__(self, skill):
        self.skill = skill

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        skill = self.skill
        filename = _filename(skill["name"])
        source = skill["code"]
        # Tracebacks and inspect find the skill's lines here (the code never exists as a file).
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module.__file__ = filename
        module.__doc__ = skill.get("description")
        module.__dict__.update(context.current().api)
        _check(skill["name"], source)
        tree = _plan.rewrite(ast.parse(source, filename))
        exec(compile(tree, filename, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, fullname):
        return self.skill["code"]


def _filename(name):
    return f"<skill {name}>"


def _fetch(fullname, name):
    try:
        skill = _rpc().call_sync("read_skill", {"name": name})
    except KeyError as error:
        raise ModuleNotFoundError(f"{error.args[0] if error.args else error}; runtime.list_skills() lists them",
                                  name=fullname) from None
    if not skill.get("code"):
        raise ImportError(f"Skill {skill['name']!r} has no code: it is documentation, read it with "
                          f"await runtime.read_skill({skill['name']!r})", name=fullname)
    return skill


def _check(name, source):
    """Sends the skill's tool calls to the host; its findings become notes on this run's result."""
    calls = _skill_code.analyse(source, _filename(name))["calls"]
    if not calls:
        return
    try:
        _rpc().call_sync("check_skill_calls", {"skill": name, "calls": calls})
    except Exception:
        pass  # a check that can't run must not stop the import


def save_params(name, code, description, overwrite):
    """The save_skill RPC's params: the code as text (from a string, function or class), checked to compile
    and to define at least one public function or class, with its functions and the servers it calls."""
    if not isinstance(name, str):
        raise TypeError(f"A skill name must be a string, not {type(name).__name__}")
    if not isinstance(description, str):
        raise TypeError(f"A skill description must be a string, not {type(description).__name__}")
    source = code if isinstance(code, str) else source_of(code)
    try:
        compile(source, _filename(name), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        where = f"line {error.lineno}: " if getattr(error, "lineno", None) else ""
        raise ValueError(f"The code of skill {name!r} does not compile: {where}"
                         f"{getattr(error, 'msg', error)}") from None
    analysis = _skill_code.analyse(source)
    if not analysis["functions"]:
        raise ValueError(f"The code of skill {name!r} defines no public function or class: those are what "
                         "`from skills import ...` gives later sessions")
    servers = sorted({_proxy.server_name(call["server"]) for call in analysis["calls"]})
    return {"name": name, "code": source, "description": description, "overwrite": bool(overwrite),
            "servers": servers, "functions": analysis["functions"]}


def source_of(obj):
    """The source of a function or class defined in an earlier cell (inspect.getsource can't find it: the
    cells were never files), or of one defined in a real module."""
    if inspect.isclass(obj):
        return _class_source(obj)
    function = inspect.unwrap(getattr(obj, "__func__", obj))
    code = getattr(function, "__code__", None)
    if code is None:
        raise TypeError(f"save_skill takes code as a string, or a function or class defined in this session, "
                        f"not {type(obj).__name__}")
    if function.__name__ == "<lambda>":
        raise ValueError("A lambda cannot be saved as a skill: define the function with def")
    lines = context.current().executor.sources.lines_of(code)
    if lines is None:
        try:
            return textwrap.dedent(inspect.getsource(function))
        except (OSError, TypeError):
            raise ValueError(f"The source of {function.__name__!r} is not available; pass the code as a string") \
                from None
    block = inspect.getblock([line + "\n" for line in lines[code.co_firstlineno - 1:]])
    return textwrap.dedent("".join(block))


def _class_source(cls):
    cells = context.current().executor.sources.cells
    first = getattr(cls, "__firstlineno__", None)
    for source in reversed(cells):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if first is not None and first not in (start, node.lineno):
                    continue
                return "\n".join(source.splitlines()[start - 1:node.end_lineno]) + "\n"
    try:
        return textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        raise ValueError(f"The source of class {cls.__name__!r} is not available; pass the code as a string") \
            from None


async def functions_of(entry):
    """The public functions of a skill listed by list_skills (its code fetched once per digest)."""
    digest = entry.get("digest")
    if not entry.get("has_code"):
        return []
    if digest not in _functions:
        skill = await _rpc().call("read_skill", {"name": entry["name"]})
        _functions[digest] = _skill_code.analyse(skill.get("code") or "")["functions"]
    return _functions[digest]


def functions_of_sync(entry):
    """Blocking functions_of()."""
    digest = entry.get("digest")
    if not entry.get("has_code"):
        return []
    if digest not in _functions:
        skill = _rpc().call_sync("read_skill", {"name": entry["name"]})
        _functions[digest] = _skill_code.analyse(skill.get("code") or "")["functions"]
    return _functions[digest]


async def with_functions(entries):
    """list_skills entries with the public functions of each local skill that has code."""
    found = await asyncio.gather(*(functions_of(e) for e in entries))
    return [_listed(e, f) for e, f in zip(entries, found)]


def with_functions_sync(entries):
    """Blocking with_functions()."""
    return [_listed(e, functions_of_sync(e)) for e in entries]


def _listed(entry, functions):
    item = {key: entry[key] for key in ("name", "module", "server", "description") if entry.get(key) is not None}
    item["functions"] = [{k: f[k] for k in ("name", "signature", "doc", "async", "kind") if k in f}
                         for f in functions]
    return item


def _local_skill_hits(hits):
    return [hit for hit in hits if hit.get("kind") == "skill" and "/" not in hit.get("tool", "")]


async def add_functions(hits):
    """Search hits with each local skill's module and public functions added."""
    wanted = _local_skill_hits(hits)
    if wanted:
        entries = {e["name"]: e for e in await _rpc().call("list_skills", {})}
        listed = await with_functions([entries[h["tool"]] for h in wanted if h["tool"] in entries])
        _merge(wanted, listed)
    return hits


def add_functions_sync(hits):
    """Blocking add_functions()."""
    wanted = _local_skill_hits(hits)
    if wanted:
        entries = {e["name"]: e for e in _rpc().call_sync("list_skills", {})}
        _merge(wanted, with_functions_sync([entries[h["tool"]] for h in wanted if h["tool"] in entries]))
    return hits


def _merge(hits, listed):
    by_name = {item["name"]: item for item in listed}
    for hit in hits:
        item = by_name.get(hit["tool"])
        if item:
            hit["module"], hit["functions"] = item.get("module"), item["functions"]
