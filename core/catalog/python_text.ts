/**
 * Python source text as the stubs write it: identifiers, string and scalar literals, unions, docstrings and
 * comments that no text from a server can break out of (quotes, backslashes, control characters).
 * @module
 */

/** Python's keywords: never a parameter, function or class name. */
export const KEYWORDS = new Set(
  ("False None True and as assert async await break class continue def del elif else except finally for " +
    "from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "),
);

/** Whether `name` can be a Python keyword argument. */
export function isPythonIdentifier(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !KEYWORDS.has(name);
}

/** A union of type texts: members deduplicated, and `Any` when any member is. */
export function union(types: string[]): string {
  const parts = [...new Set(types.flatMap((t) => splitUnion(t)))];
  if (parts.includes("Any") || !parts.length) return "Any";
  return parts.join(" | ");
}

/** The members of a union written by this module (nested brackets are never split). */
export function splitUnion(type: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < type.length; i++) {
    const c = type[i];
    if (c === "[" || c === "(" || c === "{") depth++;
    else if (c === "]" || c === ")" || c === "}") depth--;
    else if (c === "|" && depth === 0 && type[i - 1] === " " && type[i + 1] === " ") {
      parts.push(type.slice(start, i - 1));
      start = i + 2;
    } else if (c === '"') {
      // Skip a string literal: its characters are not structure.
      for (i++; i < type.length && type[i] !== '"'; i++) if (type[i] === "\\") i++;
    }
  }
  parts.push(type.slice(start));
  return parts;
}

/** A JSON scalar as a Python literal. */
export function pythonLiteral(value: unknown): string {
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(value);
  return pythonString(String(value));
}

/** A string as a Python double-quoted literal: JSON's escapes are Python's, bar a few code points. */
export function pythonString(text: string): string {
  return JSON.stringify(text).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** CamelCase of a name: `read_text_file` -> `ReadTextFile`. */
export function camel(name: string): string {
  return name.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0].toUpperCase() + w.slice(1)).join("");
}

/** A triple-quoted docstring, indented; quotes, backslashes and control characters cannot break out. */
export function docstring(text: string, indent: string): string {
  const safe = printable(text).replaceAll("\\", "\\\\").replaceAll('"""', '\\"\\"\\"').replace(/"$/, '\\"');
  const lines = safe.split("\n").map((line, i) => (i && line ? indent + line : line));
  return `${indent}"""${lines.join("\n")}${lines.length > 1 ? `\n${indent}` : ""}"""`;
}

/** Text for a `#` comment: one line, printable. */
export function comment(text: string): string {
  return oneLine(printable(text));
}

export function oneLine(text: string): string {
  return printable(text).replace(/\s+/g, " ").trim();
}

/** Without control characters (newlines and tabs stay): nothing in a stub can reach a terminal raw. */
export function printable(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/g, "").replace(/\t/g, " ")
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
