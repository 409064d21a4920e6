"""The arguments of a tool call as far as they are literals, read with `ast`: the keyword names (a
`**{"a": 1}` spread counts as `a=1`), and the JSON value each literal argument sends, with None for any
part that cannot be read (a name, a call, an f-string): the host never judges None. Values are capped."""
import ast
import json
import math

MAX_VALUE_CHARS = 65_536
"""Most characters of literal argument values kept per call; a larger value is left unknown."""

_UNKNOWN = None


def keywords(keywords):
    """(names, literal values, dynamic) of a call's keyword arguments; `**{"a": 1}` counts as `a=1`."""
    names, values, dynamic = [], {}, False
    for keyword in keywords:
        if keyword.arg is not None:
            names.append(keyword.arg)
            _keep(values, keyword.arg, keyword.value)
            continue
        spread, spread_values, spread_dynamic = argument_names(keyword.value)
        names += spread
        values.update(spread_values)
        dynamic = dynamic or spread_dynamic
    return names, values, dynamic


def argument_names(node):
    """(keys, literal values, dynamic) of a literal arguments dict (or dict(...) call)."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return [], {}, False
    if isinstance(node, ast.Dict):
        names, values, dynamic = [], {}, False
        for key, value in zip(node.keys, node.values):
            name = literal_str(key) if key is not None else None
            if name is None:
                dynamic = True
                continue
            names.append(name)
            _keep(values, name, value)
        return names, values, dynamic
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return keywords(node.keywords)
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
            name = literal_str(key) if key is not None else None
            if name is None:
                return _UNKNOWN  # a ** spread or a non-string key: the keys are not all known
            result[name] = literal(value, depth + 1)
        return result
    return _UNKNOWN


def literal_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
