/**
 * The caps on what one upstream server's `tools/list` may bring in, checked tool by tool: a tool that
 * breaks one (a name too long or with control characters, a description or schema too large, a schema
 * nested too deep, a shape the MCP spec does not allow) is left out with a problem that says why, and the
 * server's other tools work. Nothing here runs a server-supplied regular expression, and the walk over a
 * schema stops as soon as it passes a cap, so a hostile listing costs at most the caps' worth of work.
 * The catalog, the sandbox API and servers added at run time all take their tools through `admitTools`.
 * @module
 */
import { specTypeSchemas, type Tool } from "@modelcontextprotocol/client";
import { pythonAlias } from "../python_alias.ts";

/** The caps on one server's tools. */
export interface ToolCaps {
  /** Tools kept per server; later ones in the listing are left out. */
  maxTools: number;
  /** Longest tool name, in characters (the MCP spec says names SHOULD be 1 to 128 characters). */
  maxName: number;
  /** Longest description kept, in characters; search and summaries use a shorter prefix of it. */
  maxDescription: number;
  /** Largest `inputSchema` or `outputSchema`, counted as the characters of its JSON. */
  maxSchema: number;
  /** Deepest nesting of objects and arrays in a schema. */
  maxDepth: number;
  /** All of one server's kept tools together, as JSON characters (their docs must fit one sandbox frame). */
  maxServer: number;
}

/** The caps codemode applies to every server (docs/security.md, "Upstream servers"). */
export const TOOL_CAPS: ToolCaps = {
  maxTools: 2_000,
  maxName: 128,
  maxDescription: 64 * 1024,
  maxSchema: 128 * 1024,
  maxDepth: 64,
  maxServer: 8 * 1024 * 1024,
};

/** Something wrong with one tool of a server's listing: left out, or kept with a caveat. */
export interface ToolProblem {
  /** The tool's name as the server sent it (clipped), or `#<index>` when it has none. */
  tool: string;
  /** What is wrong, and for a kept tool what to do about it. */
  problem: string;
  /** Whether the tool was left out of the catalog (an alias collision keeps it). */
  leftOut: boolean;
}

/** A server's tools after the caps: the ones kept, and the problems found. */
export interface AdmittedTools {
  tools: Tool[];
  problems: ToolProblem[];
}

/** C0 and C1 control characters and DEL: no tool name needs one, and a terminal obeys them. */
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * The tools of a listing that pass the caps, in listing order, and a problem for each that does not.
 * Two tools whose names share a Python alias ("get-file", "get.file") are both kept; the first listed
 * owns the alias (so the sandbox and the host resolve it alike) and the other is reported. Yields to the
 * event loop every few hundred tools, so a listing of thousands never holds it for long.
 */
export async function admitTools(
  listed: readonly unknown[],
  caps: ToolCaps = TOOL_CAPS,
): Promise<AdmittedTools> {
  const admission = new Admission(caps);
  for (let i = 0; i < listed.length; i++) {
    if (!admission.add(listed[i], i, listed.length)) break;
    if (i % 250 === 249) await new Promise((resolve) => setImmediate(resolve));
  }
  return { tools: admission.tools, problems: admission.problems };
}

/** One listing's admission, tool by tool. */
class Admission {
  readonly tools: Tool[] = [];
  readonly problems: ToolProblem[] = [];
  #caps: ToolCaps;
  #names = new Set<string>();
  #aliases = new Map<string, string>();
  #total = 0;

  constructor(caps: ToolCaps) {
    this.#caps = caps;
  }

  /** Takes the tool at `index` in or reports it; false once the server's tool cap is reached. */
  add(raw: unknown, index: number, count: number): boolean {
    const caps = this.#caps;
    if (this.tools.length >= caps.maxTools) {
      this.problems.push({
        tool: `#${index}`,
        problem: `${count - index} more tools left out: a server may bring at most ${caps.maxTools}`,
        leftOut: true,
      });
      return false;
    }
    const name = nameOf(raw, index);
    const refuse = (problem: string) => void this.problems.push({ tool: name, problem, leftOut: true });
    const why = tooBig(raw, caps);
    if (why) return refuse(why), true;
    const parsed = specTypeSchemas.Tool["~standard"].validate(raw);
    if ("then" in parsed || parsed.issues) {
      const issue = "then" in parsed ? undefined : parsed.issues?.[0];
      const where = issue?.path?.length ? ` at ${issue.path.map((p) => String(p)).join(".")}` : "";
      return refuse(`not a valid MCP tool${where}: ${clipName(issue?.message ?? "invalid", 200)}`), true;
    }
    const tool = parsed.value as Tool;
    if (this.#names.has(tool.name)) return refuse("listed twice: the first one is kept"), true;
    const size = jsonSize(raw, caps.maxServer + 1);
    if (this.#total + size > caps.maxServer) {
      return refuse(`its doc (${size} characters) would take the server past ${caps.maxServer} characters`),
        true;
    }
    this.#total += size;
    this.#names.add(tool.name);
    this.tools.push(tool);
    const alias = pythonAlias(tool.name);
    const owner = this.#aliases.get(alias);
    if (owner === undefined) this.#aliases.set(alias, tool.name);
    else if (alias !== tool.name) {
      this.problems.push({
        tool: name,
        problem:
          `its Python alias "${alias}" belongs to "${clipName(owner, 64)}", listed first: call it by ` +
          `its name, runtime.call_tool(server, ${JSON.stringify(clipName(tool.name, 64))}, {...})`,
        leftOut: false,
      });
    }
    return true;
  }
}

/** Why a raw tool breaks a cap on its name, description or schemas; undefined when it passes them. */
function tooBig(raw: unknown, caps: ToolCaps): string | undefined {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return "not a tool object";
  const tool = raw as Record<string, unknown>;
  if (typeof tool.name !== "string" || !tool.name) return "it has no name";
  if (tool.name.length > caps.maxName) return `its name is longer than ${caps.maxName} characters`;
  if (CONTROL.test(tool.name)) return "its name contains control characters";
  for (const field of ["description", "title"] as const) {
    const text = tool[field];
    if (typeof text === "string" && text.length > caps.maxDescription) {
      return `its ${field} is longer than ${caps.maxDescription} characters`;
    }
  }
  for (const field of ["inputSchema", "outputSchema", "annotations", "_meta"] as const) {
    const why = schemaTooBig(tool[field], caps);
    if (why) return `its ${field} ${why}`;
  }
  return undefined;
}

/** Why a JSON value is too large or too deep for a schema; walks it without recursion and stops early. */
function schemaTooBig(value: unknown, caps: Pick<ToolCaps, "maxSchema" | "maxDepth">): string | undefined {
  if (value === undefined) return undefined;
  let size = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [item, depth] = stack.pop()!;
    size += scalarSize(item);
    if (size > caps.maxSchema) return `is larger than ${caps.maxSchema} characters of JSON`;
    if (!item || typeof item !== "object") continue;
    if (depth > caps.maxDepth) return `is nested more than ${caps.maxDepth} levels deep`;
    if (Array.isArray(item)) {
      for (const child of item) stack.push([child, depth + 1]);
    } else {
      for (const key in item) {
        size += key.length + 3;
        stack.push([(item as Record<string, unknown>)[key], depth + 1]);
      }
    }
  }
  return undefined;
}

/** The characters of a value's JSON, about (string escapes are not counted), up to `stopAt`. */
export function jsonSize(value: unknown, stopAt = Infinity): number {
  let size = 0;
  const stack: unknown[] = [value];
  while (stack.length && size < stopAt) {
    const item = stack.pop();
    size += scalarSize(item);
    if (!item || typeof item !== "object") continue;
    if (Array.isArray(item)) {
      for (const child of item) stack.push(child);
    } else {
      for (const key in item) {
        size += key.length + 3;
        stack.push((item as Record<string, unknown>)[key]);
      }
    }
  }
  return size;
}

function scalarSize(item: unknown): number {
  if (typeof item === "string") return item.length + 2;
  if (item && typeof item === "object") return 2;
  return item === undefined ? 0 : String(item).length + 1;
}

function nameOf(raw: unknown, index: number): string {
  const name = raw && typeof raw === "object" ? (raw as { name?: unknown }).name : undefined;
  return typeof name === "string" && name ? clipName(name, 128) : `#${index}`;
}

/** A server-supplied name cut to `max` characters, for messages. */
function clipName(name: string, max: number): string {
  return name.length > max ? `${name.slice(0, max)}…` : name;
}
