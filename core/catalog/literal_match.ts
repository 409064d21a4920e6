/**
 * Whether a literal argument can match a tool's JSON schema, for the pre-run check: only the failures
 * that are certain on any server count. Servers validate with different libraries and some convert
 * leniently (pydantic's lax mode turns "5" into 5, "yes" into True, 1 into True), so a value that such
 * a conversion could make valid is never a mismatch: a string is wrong for a number only when it does not
 * read as one. Unknown parts of a value arrive as null and are never judged, so None is never judged
 * either. Only `type`, `enum`, `const`, local `$ref`s and the combinators are read; `pattern`, `format` and
 * ranges are the server's business. Bounded in depth and in nodes: schemas and values are untrusted.
 * @module
 */

import { isSchema, resolveLocalRef } from "./schema.ts";

/** Bounds on one judgement. */
export const MATCH_LIMITS = { depth: 16, nodes: 10_000 } as const;

/**
 * Why `value` cannot match `schema` on any server, as a short phrase (e.g. `a string where a number is
 * expected`), or undefined when it may match or that cannot be told. `root` resolves local `$ref`s.
 */
export function mismatch(value: unknown, schema: unknown, root: unknown = schema): string | undefined {
  return new Judge(root).why(value, schema, 0);
}

class Judge {
  #nodes: number = MATCH_LIMITS.nodes;
  constructor(private root: unknown) {}

  why(value: unknown, schema: unknown, depth: number): string | undefined {
    if (value === null || value === undefined || !isSchema(schema)) return undefined;
    if (--this.#nodes < 0 || depth > MATCH_LIMITS.depth) return undefined;
    if (typeof schema.$ref === "string") {
      const target = resolveLocalRef(this.root, schema.$ref, MATCH_LIMITS.depth);
      const why = target === undefined ? undefined : this.why(value, target, depth + 1);
      if (why) return why;
    }
    const listed = Array.isArray(schema.enum) ? schema.enum : "const" in schema ? [schema.const] : undefined;
    if (listed) {
      const why = outsideEnum(value, listed);
      if (why) return why;
    }
    if (Array.isArray(schema.allOf)) {
      for (const part of schema.allOf) {
        const why = this.why(value, part, depth + 1);
        if (why) return why;
      }
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      const variants = schema[key];
      if (!Array.isArray(variants) || !variants.length) continue;
      const reasons = variants.map((v) => this.why(value, v, depth + 1));
      if (reasons.every(Boolean)) {
        return reasons.length === 1 ? reasons[0] : `${describe(value)} matches none of its allowed forms`;
      }
    }
    const types = typeof schema.type === "string"
      ? [schema.type]
      : Array.isArray(schema.type)
      ? schema.type
      : [];
    if (types.length && !types.some((t) => typeof t === "string" && accepts(t, value))) {
      const wanted = types.filter((t): t is string => typeof t === "string").map(article).join(" or ");
      return `${describe(value)} where ${wanted} is expected`;
    }
    if (Array.isArray(value) && isSchema(schema.items)) {
      for (const [i, item] of value.entries()) {
        const why = this.why(item, schema.items, depth + 1);
        if (why) return `item ${i}: ${why}`;
      }
    }
    if (isSchema(value) && isSchema(schema.properties)) {
      for (const [key, item] of Object.entries(value)) {
        if (!Object.hasOwn(schema.properties, key)) continue;
        const why = this.why(item, schema.properties[key], depth + 1);
        if (why) return `${JSON.stringify(key)}: ${why}`;
      }
    }
    return undefined;
  }
}

/** Whether a JSON type could accept `value` after a lenient server's conversions. */
function accepts(type: string, value: unknown): boolean {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number" || typeof value === "boolean" || numeric(value);
    case "integer":
      return (typeof value === "number" && Number.isInteger(value)) || typeof value === "boolean" ||
        (numeric(value) && Number.isInteger(Number(value)));
    case "boolean":
      return typeof value === "boolean" || value === 0 || value === 1 ||
        (typeof value === "string" && BOOLEAN_WORDS.has(value.trim().toLowerCase()));
    case "array":
      return Array.isArray(value);
    case "object":
      return isSchema(value);
    case "null":
      return false;
    default:
      return true; // a type this module does not know: it cannot say
  }
}

const BOOLEAN_WORDS = new Set(["true", "false", "yes", "no", "on", "off", "1", "0", "t", "f", "y", "n"]);

/** A string that some server would read as a number. */
function numeric(value: unknown): boolean {
  return typeof value === "string" && /^\s*[+-]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(value);
}

/** Why a value is not one of an enum's values; undefined when it is, or when a conversion might make it so. */
function outsideEnum(value: unknown, listed: unknown[]): string | undefined {
  if (!listed.length) return undefined;
  const kind = (v: unknown) => Array.isArray(v) ? "array" : v === null ? "null" : typeof v;
  // Only values of one plain kind compare without any server's conversions coming into it.
  if (!["string", "number", "boolean"].includes(kind(value))) return undefined;
  if (!listed.every((v) => kind(v) === kind(value))) return undefined;
  if (listed.includes(value)) return undefined;
  const shown = listed.slice(0, 12).map((v) => JSON.stringify(v)).join(", ");
  return `${JSON.stringify(value)} is not one of ${shown}${listed.length > 12 ? ", ..." : ""}`;
}

function describe(value: unknown): string {
  if (typeof value === "string") {
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  }
  if (typeof value === "number") return `the number ${value}`;
  if (typeof value === "boolean") return value ? "True" : "False";
  if (Array.isArray(value)) return "a list";
  if (isSchema(value)) return "a dict";
  return "this value";
}

function article(type: string): string {
  const words: Record<string, string> = {
    string: "a string",
    number: "a number",
    integer: "an integer",
    boolean: "a bool",
    array: "a list",
    object: "a dict",
    null: "None",
  };
  return words[type] ?? type;
}
