/**
 * The glob lists policy rules are written in: `*` any run of characters, `?` one, matched against a name
 * and its Python alias. Tool patterns are `server/tool`, or `tool` for a tool of any server.
 * @module
 */
import * as z from "zod";
import { pythonAlias } from "../python_alias.ts";

/**
 * A glob list as a setting: comma-separated (a config file may give a YAML/JSON list instead). Server
 * patterns have no "/"; patterns over added servers ("add") match registry names, which have one.
 */
export function globList(kind: "server" | "tool" | "add") {
  return z.string().transform((raw, ctx) => {
    const globs = raw.split(",").map((g) => g.trim()).filter(Boolean);
    for (const glob of globs) {
      if (kind === "server" && glob.includes("/")) {
        ctx.addIssue({ code: "custom", message: `server patterns have no "/" (got "${glob}")` });
      }
      if (kind === "tool" && glob.startsWith("/")) {
        ctx.addIssue({ code: "custom", message: `"${glob}" has an empty server part; write "*${glob}"` });
      }
    }
    return globs;
  });
}

/** A glob as an anchored RegExp: `*` matches any run of characters, `?` one; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  const body = [...glob].map((ch) =>
    ch === "*" ? ".*" : ch === "?" ? "." : ch.replace(/[.+^${}()|[\]\\/-]/g, "\\$&")
  ).join("");
  return new RegExp(`^${body}$`, "s");
}

/** Compiled globs: a policy is consulted on every tool call, and its globs are few and fixed. */
const compiled = new Map<string, RegExp>();

/** Whether `glob` matches `name` or its Python alias. */
export function globMatches(glob: string, name: string): boolean {
  if (glob === "*") return true;
  let re = compiled.get(glob);
  if (!re) {
    re = globToRegExp(glob);
    if (compiled.size < 1024) compiled.set(glob, re);
  }
  return re.test(name) || re.test(pythonAlias(name));
}

/** Whether a `server/tool` pattern (or a bare `tool` pattern, any server) matches a tool. */
export function toolGlobMatches(glob: string, server: string, tool: string): boolean {
  const slash = glob.indexOf("/");
  const [serverGlob, toolGlob] = slash < 0 ? ["*", glob] : [glob.slice(0, slash), glob.slice(slash + 1)];
  return globMatches(serverGlob, server) && globMatches(toolGlob, tool);
}
