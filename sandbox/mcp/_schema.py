"""Python signatures and help text derived from a tool's JSON input schema."""
import functools
import inspect
import keyword
import operator

_TYPES = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def annotation(schema):
    """The Python type a JSON schema describes, or inspect.Parameter.empty when it can't say."""
    if not isinstance(schema, dict):
        return inspect.Parameter.empty
    kind = schema.get("type")
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(kind, list):
        variants = [{"type": k} for k in kind]
    if variants:
        types = [annotation(v) for v in variants]
        if any(t is inspect.Parameter.empty for t in types):
            return inspect.Parameter.empty
        return functools.reduce(operator.or_, dict.fromkeys(types))
    if kind == "array":
        items = annotation(schema.get("items"))
        return list if items is inspect.Parameter.empty else list[items]
    if kind is None and "enum" in schema:
        kinds = {type(v) for v in schema["enum"]}
        return kinds.pop() if len(kinds) == 1 else inspect.Parameter.empty
    return _TYPES.get(kind, inspect.Parameter.empty)


def signature(schema):
    """A keyword-only signature: required properties first, optional ones with their default."""
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    parameters = []
    extra = schema.get("additionalProperties") not in (None, False)
    for name in sorted(properties, key=lambda n: n not in required):
        if not name.isidentifier() or keyword.iskeyword(name):
            extra = True  # still passable via **{"odd-name": value}
            continue
        prop = properties[name] if isinstance(properties[name], dict) else {}
        default = inspect.Parameter.empty if name in required else prop.get("default")
        kind = inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(name, kind, default=default, annotation=annotation(prop)))
    if extra:
        parameters.append(inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(parameters)


def describe(description, schema):
    """Help text: the tool's description, then one line per parameter."""
    lines = [description.strip() or "(no description)"]
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if properties:
        required = set(schema.get("required") or [])
        lines += ["", "Parameters:"]
        for name, prop in properties.items():
            prop = prop if isinstance(prop, dict) else {}
            kind = prop.get("type", "any")
            kind = "|".join(map(str, kind)) if isinstance(kind, list) else str(kind)
            flags = ", required" if name in required else ""
            text = f"  {name} ({kind}{flags})"
            if prop.get("description"):
                text += f": {str(prop['description']).strip()}"
            if "default" in prop:
                text += f" [default: {prop['default']!r}]"
            if "enum" in prop:
                text += f" [one of: {', '.join(map(repr, prop['enum']))}]"
            lines.append(text)
    return "\n".join(lines)
