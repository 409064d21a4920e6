/**
 * Variable expansion in server specs: the `${...}` forms MCP clients write into their configs.
 *
 * Plugins rewrite client-only syntaxes (Gemini's bare `$VAR`) into the braced form with
 * {@link braceBareVars}, so this module is the one place that knows what a variable means.
 * @module
 */

import { basename } from "node:path";
import type { Diagnostic, DiscoveryContext, ServerSpec } from "../contracts/discovery.ts";

/** What an expansion needs to know: the environment, the working directory and the home directory. */
export type ExpandContext = Pick<DiscoveryContext, "env" | "cwd" | "home">;

/** The result of expanding one string. */
export interface Expansion {
  value: string;
  /** Variables that were referenced without a value or default; they expanded to "". */
  unset: string[];
  /** `${input:id}` ids: only the client that owns the config can prompt for them. */
  inputs: string[];
  /** References this module does not understand (e.g. `${command:x}`); left as written. */
  unsupported: string[];
}

/** The result of expanding every expandable field of one server. */
export interface ServerExpansion {
  spec: ServerSpec;
  diagnostics: Diagnostic[];
  /** Set when the server cannot be used as written; the reason is shown to the user. */
  unusable?: string;
}

const BRACED = /\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const WITH_DEFAULT = /^([A-Za-z_][A-Za-z0-9_]*):-(.*)$/s;

/** Expands `${VAR}`, `${VAR:-default}`, `${env:VAR}`, `${workspaceFolder}`, `${userHome}` and `${input:id}`. */
export function expandVars(text: string, context: ExpandContext): Expansion {
  const unset: string[] = [];
  const inputs: string[] = [];
  const unsupported: string[] = [];
  const lookup = (name: string): string => {
    const value = context.env[name];
    if (value !== undefined) return value;
    unset.push(name);
    return "";
  };
  const value = text.replace(BRACED, (whole, inner: string) => {
    if (inner === "workspaceFolder") return context.cwd;
    if (inner === "workspaceFolderBasename") return basename(context.cwd);
    if (inner === "userHome") return context.home;
    if (inner.startsWith("env:") && NAME.test(inner.slice(4))) return lookup(inner.slice(4));
    if (inner.startsWith("input:") && inner.length > 6) {
      inputs.push(inner.slice(6));
      return whole;
    }
    if (NAME.test(inner)) return lookup(inner);
    const withDefault = WITH_DEFAULT.exec(inner);
    if (withDefault) return context.env[withDefault[1]] || withDefault[2];
    unsupported.push(whole);
    return whole;
  });
  return { value, unset, inputs, unsupported };
}

/** Rewrites bare `$VAR` references (Gemini CLI syntax) into `${VAR}`, leaving braced ones alone. */
export function braceBareVars(text: string): string {
  return text.replace(/\$([A-Za-z_][A-Za-z0-9_]*)/g, "${$1}");
}

/** Expands variables in command, args, env values, cwd, url, header values and OAuth client id and secret. */
export function expandServer(spec: ServerSpec, context: ExpandContext): ServerExpansion {
  const unset = new Set<string>();
  const inputs = new Set<string>();
  const unsupported = new Set<string>();
  const one = (text: string): string => {
    const result = expandVars(text, context);
    result.unset.forEach((name) => unset.add(name));
    result.inputs.forEach((id) => inputs.add(id));
    result.unsupported.forEach((ref) => unsupported.add(ref));
    return result.value;
  };
  const map = (record: Record<string, string>): Record<string, string> =>
    Object.fromEntries(Object.entries(record).map(([key, value]) => [key, one(value)]));

  const expanded: ServerSpec = { ...spec };
  if (spec.command !== undefined) expanded.command = one(spec.command);
  if (spec.args) expanded.args = spec.args.map(one);
  if (spec.env) expanded.env = map(spec.env);
  if (spec.cwd !== undefined) expanded.cwd = one(spec.cwd);
  if (spec.url !== undefined) expanded.url = one(spec.url);
  if (spec.headers) expanded.headers = map(spec.headers);
  if (spec.oauth) {
    expanded.oauth = { ...spec.oauth };
    if (spec.oauth.clientId !== undefined) expanded.oauth.clientId = one(spec.oauth.clientId);
    if (spec.oauth.clientSecret !== undefined) expanded.oauth.clientSecret = one(spec.oauth.clientSecret);
  }

  const file = spec.source.file;
  const server = spec.name;
  const diagnostics: Diagnostic[] = [];
  for (const name of unset) {
    diagnostics.push({
      severity: "warning",
      file,
      server,
      message: `Environment variable "${name}" is not set: server "${server}" gets an empty value; ` +
        `export it before starting codemode`,
    });
  }
  for (const ref of unsupported) {
    diagnostics.push({
      severity: "warning",
      file,
      server,
      message: `Variable reference "${ref}" is not supported: server "${server}" gets it verbatim; ` +
        `replace it with a value or an environment variable`,
    });
  }
  if (inputs.size === 0) return { spec: expanded, diagnostics };
  const refs = [...inputs].map((id) => `"\${input:${id}}"`).join(", ");
  const unusable = `needs ${refs}, which only the client that owns the config can prompt for`;
  diagnostics.push({
    severity: "error",
    file,
    server,
    message: `Server "${server}" ${unusable}: it is skipped; ` +
      `write the value (or an \${env:VAR} reference) into the config instead`,
  });
  return { spec: expanded, diagnostics, unusable };
}
