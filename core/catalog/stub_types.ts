/**
 * JSON Schema to Python type text for the stubs: `str`, `int`, `float`, `bool`, `list[...]`,
 * `dict[str, ...]`, `Literal[...]`, unions, and `TypedDict`s for objects with known properties (collected as
 * class definitions), `Any` for the rest. Bounded by STUB_LIMITS; a part it would have to cut is `Any`.
 * @module
 */
import { closed, isSchema, propertiesOf, resolveLocalRef, type Schema } from "./schema.ts";
import {
  camel,
  clip,
  comment,
  docstring,
  isPythonIdentifier,
  KEYWORDS,
  oneLine,
  pythonLiteral,
  pythonString,
  splitUnion,
  union,
} from "./python_text.ts";

/** One parameter of a tool's signature, with its type as Python text. */
export interface StubParam {
  name: string;
  type: string;
  required: boolean;
  /** The default as Python text (a literal, or `...` when the schema gives none that fits the type). */
  default?: string;
}

/** A tool's signature: its keyword-only parameters, whether it takes more (`**arguments`), its return type. */
export interface StubSignature {
  params: StubParam[];
  /** Keywords the signature cannot name (open schema, names that are not identifiers) pass through here. */
  extra: boolean;
  returns: string;
}

/** The bounds that keep a hostile schema from costing more than a little time and memory. */
export const STUB_LIMITS = {
  /** Nesting levels of one schema turned into types; deeper parts are `Any`. */
  depth: 12,
  /** Schema nodes visited per tool; past it every further type is `Any`. */
  nodes: 5000,
  /** Values of one enum written as a `Literal`; a longer enum is typed by its values' base type. */
  enumValues: 64,
  /** Characters of one enum value or default written out. */
  literalChars: 200,
  /** Properties of one object typed as a `TypedDict` (and parameters of one tool); more: `dict[str, Any]`. */
  properties: 300,
  /** `TypedDict`s one tool may define; more: `dict[str, Any]`. */
  classes: 100,
  /** Characters of a tool's description in its docstring. */
  description: 4000,
  /** Characters of one parameter's or field's description. */
  fieldDescription: 300,
  /** Characters of one tool's stub; a longer one is replaced by `(**arguments: Any) -> Any`. */
  toolChars: 200_000,
  /** Characters of one server's module; the tools past it are named in a comment only. */
  moduleChars: 4_000_000,
} as const;

/** Names the module itself uses; a class must not take one. */
const RESERVED = new Set([
  "Any",
  "Literal",
  "NotRequired",
  "TypedDict",
  "str",
  "int",
  "float",
  "bool",
  "list",
  "dict",
]);
const TYPE_KEYWORDS = ["type", "enum", "const", "properties", "items", "$ref", "anyOf", "oneOf", "allOf"];

/** Unique Python names for the classes of a module. */
export class Names {
  #taken: Set<string>;
  constructor(taken: Iterable<string>) {
    this.#taken = new Set(taken);
  }
  claim(hint: string): string {
    let base = camel(hint) || "Object";
    if (!/^[A-Za-z_]/.test(base)) base = `T${base}`;
    if (RESERVED.has(base) || KEYWORDS.has(base)) base = `${base}_`;
    let name = base;
    for (let i = 2; this.#taken.has(name); i++) name = `${base}${i}`;
    this.#taken.add(name);
    return name;
  }
}

/** Turns schemas into type text, collecting the TypedDicts they need; bounded by STUB_LIMITS. */
export class TypeWriter {
  readonly classes: string[] = [];
  /** Parameters the signature cannot name, with their types. */
  readonly odd = new Map<string, string>();
  #nodes: number = STUB_LIMITS.nodes;
  #refs = new Map<string, string>();
  #resolving = new Set<string>();
  #classCount = 0;

  constructor(private names: Names, private hint: string, public root?: unknown) {}

  signature(schema: unknown): StubSignature {
    const s = isSchema(schema) ? schema : {};
    const properties = propertiesOf(s);
    const required = new Set(
      Array.isArray(s.required) ? s.required.filter((r) => typeof r === "string") : [],
    );
    const entries = Object.entries(properties).slice(0, STUB_LIMITS.properties);
    const ordered = [
      ...entries.filter(([n]) => required.has(n)),
      ...entries.filter(([n]) => !required.has(n)),
    ];
    const params: StubParam[] = [];
    let extra = !closed(s) || Object.keys(properties).length > entries.length;
    for (const [name, prop] of ordered) {
      const type = this.type(prop, `${this.hint}${camel(name)}`, 1);
      if (!isPythonIdentifier(name) || name === "arguments") {
        this.odd.set(name, type);
        extra = true;
        continue;
      }
      const param: StubParam = { name, type, required: required.has(name) };
      if (!param.required) param.default = defaultText(prop, type);
      params.push(param);
    }
    return { params, extra, returns: "Any" };
  }

  type(schema: unknown, hint: string, depth: number): string {
    if (--this.#nodes < 0 || depth > STUB_LIMITS.depth || !isSchema(schema)) return "Any";
    const s = schema;
    if (typeof s.$ref === "string") return this.#ref(s.$ref, depth);
    let type = this.#bare(s, hint, depth);
    if (s.nullable === true && type !== "Any") type = union([type, "None"]);
    return type;
  }

  #bare(s: Schema, hint: string, depth: number): string {
    const literal = literalType(s);
    if (literal) return literal;
    const variants = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
    if (variants && variants.some(typeish)) {
      // Both the schema and its variants constrain the type: what they say together is not written here.
      if (typeish({ ...s, anyOf: undefined, oneOf: undefined })) return "Any";
      return union(
        variants.map((v, i) => this.type(v, `${hint}${variants.length > 1 ? i + 1 : ""}`, depth + 1)),
      );
    }
    if (Array.isArray(s.allOf) && s.allOf.some(typeish)) {
      const typed = s.allOf.filter(typeish);
      if (typed.length > 1 || typeish({ ...s, allOf: undefined })) return "Any";
      return this.type(typed[0], hint, depth + 1);
    }
    if (Array.isArray(s.type)) {
      const kinds = s.type.filter((k): k is string => typeof k === "string");
      if (!kinds.length) return "Any";
      return union(kinds.map((kind) => this.#ofType(kind, s, hint, depth)));
    }
    if (typeof s.type === "string") return this.#ofType(s.type, s, hint, depth);
    if (s.type === undefined && isSchema(s.properties)) return this.#ofType("object", s, hint, depth);
    if (s.type === undefined && s.items !== undefined) return this.#ofType("array", s, hint, depth);
    return "Any";
  }

  #ofType(kind: string, s: Schema, hint: string, depth: number): string {
    switch (kind) {
      case "string":
        return "str";
      case "integer":
        return "int";
      case "number":
        return "float";
      case "boolean":
        return "bool";
      case "null":
        return "None";
      case "array":
        // A tuple (draft 4 `items: [...]`, `prefixItems`) is not written out: any list of anything.
        if (Array.isArray(s.items) || s.prefixItems !== undefined || !isSchema(s.items)) return "list[Any]";
        return `list[${this.type(s.items, `${hint}Item`, depth + 1)}]`;
      case "object":
        return this.#object(s, hint, depth);
      default:
        return "Any";
    }
  }

  #object(s: Schema, hint: string, depth: number): string {
    const properties = propertiesOf(s);
    const count = Object.keys(properties).length;
    if (!count || !closed(s) || count > STUB_LIMITS.properties || this.#classCount >= STUB_LIMITS.classes) {
      const extra = s.additionalProperties;
      if (!count && isSchema(extra) && s.patternProperties === undefined) {
        return `dict[str, ${this.type(extra, `${hint}Value`, depth + 1)}]`;
      }
      return "dict[str, Any]";
    }
    this.#classCount++;
    const name = this.names.claim(hint);
    this.#defineClass(name, s, properties, depth);
    return name;
  }

  #defineClass(name: string, s: Schema, properties: Schema, depth: number): void {
    const required = new Set(Array.isArray(s.required) ? s.required : []);
    const fields: [string, string, string][] = [];
    for (const [key, prop] of Object.entries(properties)) {
      const type = this.type(prop, `${name}${camel(key)}`, depth + 1);
      const description = isSchema(prop) ? oneLine(String(prop.description ?? "")) : "";
      fields.push([key, required.has(key) ? type : `NotRequired[${type}]`, description]);
    }
    const plain = fields.every(([key]) => isPythonIdentifier(key));
    const doc = oneLine(String(s.description ?? ""));
    if (plain) {
      const lines = [`class ${name}(TypedDict):`];
      if (doc) lines.push(docstring(clip(doc, STUB_LIMITS.fieldDescription), "    "));
      for (const [key, type, text] of fields) {
        lines.push(
          `    ${key}: ${type}${text ? `  # ${comment(clip(text, STUB_LIMITS.fieldDescription))}` : ""}`,
        );
      }
      this.classes.push(lines.join("\n"), "");
      return;
    }
    const entries = fields.map(([key, type]) => `${pythonString(key)}: ${type}`);
    this.classes.push(`${name} = TypedDict(${pythonString(name)}, {${entries.join(", ")}})`, "");
  }

  #ref(ref: string, depth: number): string {
    const known = this.#refs.get(ref);
    if (known) return known;
    if (this.#resolving.has(ref)) return "Any";
    const target = resolveLocalRef(this.root, ref, STUB_LIMITS.depth);
    if (target === undefined) return "Any";
    const hint = camel(ref.split("/").pop() ?? "") || "Ref";
    // An object definition gets its class name before its fields are typed, so a recursive one can
    // name itself; anything else is typed inline, and a cycle through it is Any.
    if (isSchema(target) && this.#isClass(target)) {
      const name = this.names.claim(hint);
      this.#refs.set(ref, name);
      this.#classCount++;
      this.#defineClass(name, target, propertiesOf(target), depth);
      return name;
    }
    this.#resolving.add(ref);
    try {
      const type = this.type(target, hint, depth + 1);
      this.#refs.set(ref, type);
      return type;
    } finally {
      this.#resolving.delete(ref);
    }
  }

  #isClass(s: Schema): boolean {
    const count = Object.keys(propertiesOf(s)).length;
    return (s.type === "object" || s.type === undefined) && count > 0 && count <= STUB_LIMITS.properties &&
      closed(s) && this.#classCount < STUB_LIMITS.classes && literalType(s) === undefined &&
      !["anyOf", "oneOf", "allOf", "$ref"].some((k) => k in s);
  }
}

/** `Literal[...]` for an enum or const of simple values, or undefined when the schema has none. */
function literalType(s: Schema): string | undefined {
  const values = Array.isArray(s.enum) ? s.enum : "const" in s ? [s.const] : undefined;
  if (!values) return undefined;
  const simple = values.every((v) =>
    v === null || typeof v === "boolean" || (typeof v === "string" && v.length <= STUB_LIMITS.literalChars) ||
    (typeof v === "number" && Number.isSafeInteger(v))
  );
  if (!values.length || !simple || values.length > STUB_LIMITS.enumValues) {
    const kinds = new Set(values.map((v) => v === null ? "None" : typeof v === "string" ? "str" : typeof v));
    if (kinds.size === 1 && kinds.has("str")) return "str";
    return "Any";
  }
  const shown = [...new Set(values.filter((v) => v !== null).map(pythonLiteral))];
  const none = values.includes(null);
  if (!shown.length) return "None";
  return union([`Literal[${shown.join(", ")}]`, ...(none ? ["None"] : [])]);
}

/** Whether a schema says anything about the type of its value. */
function typeish(schema: unknown): boolean {
  if (!isSchema(schema)) return false;
  return TYPE_KEYWORDS.some((k) => schema[k] !== undefined);
}

/** The default as Python text when it is a simple value of the parameter's type, else `...`. */
function defaultText(prop: unknown, type: string): string {
  if (!isSchema(prop) || !("default" in prop)) return "...";
  const value = prop.default;
  const parts = splitUnion(type);
  const fits =
    (typeof value === "string" && parts.includes("str") && value.length <= STUB_LIMITS.literalChars) ||
    (typeof value === "boolean" && parts.includes("bool")) ||
    (typeof value === "number" && Number.isFinite(value) &&
      (parts.includes("float") || (parts.includes("int") && Number.isSafeInteger(value)))) ||
    (value === null && parts.includes("None")) ||
    (["string", "number", "boolean"].includes(typeof value) &&
      parts.some((p) =>
        p.startsWith("Literal[") && p.slice(8, -1).split(", ").includes(pythonLiteral(value))
      ));
  return fits ? pythonLiteral(value) : "...";
}
