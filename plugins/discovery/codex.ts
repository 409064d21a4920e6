/**
 * Codex CLI: `~/.codex/config.toml` (or `$CODEX_HOME/config.toml`), one `[mcp_servers.<name>]` table per
 * server. Remote servers are streamable HTTP; `bearer_token_env_var` names the variable holding the token.
 * @module
 */

import { parse, TomlError } from "smol-toml";
import { z } from "zod";
import type {
  Diagnostic,
  DiscoveryContext,
  DiscoveryPlugin,
  DiscoveryResult,
  ServerSpec,
} from "../../core/contracts/discovery.ts";
import {
  compact,
  describeIssues,
  fileProblem,
  isRecord,
  keyPath,
  locate,
  type Location,
  pathFor,
  readText,
} from "./_private.ts";

/** Options for the Codex CLI plugin. */
export interface CodexOptions {
  /** Read this file instead of `$CODEX_HOME/config.toml` or `~/.codex/config.toml`. */
  path?: string;
}

/** Reads Codex's usual location. */
export const defaults: CodexOptions = {};

const Entry = z.object({
  command: z.string().min(1).optional(),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  env_vars: z.array(z.string()).optional(),
  cwd: z.string().optional(),
  url: z.string().min(1).optional(),
  bearer_token_env_var: z.string().min(1).optional(),
  http_headers: z.record(z.string(), z.string()).optional(),
  env_http_headers: z.record(z.string(), z.string()).optional(),
  startup_timeout_sec: z.number().positive().optional(),
  startup_timeout_ms: z.number().positive().optional(),
  tool_timeout_sec: z.number().positive().optional(),
  enabled: z.boolean().optional(),
});

/** Where Codex keeps its config. */
export function codexLocations(context: DiscoveryContext): Location[] {
  const path = pathFor(context.platform);
  const dir = context.env.CODEX_HOME || path.join(context.home, ".codex");
  return [{ pattern: path.join(dir, "config.toml"), scope: "user" }];
}

function entry(name: string, raw: unknown, file: string, context: DiscoveryContext): DiscoveryResult {
  const problem = (detail: string, severity: Diagnostic["severity"] = "error"): Diagnostic => ({
    severity,
    file,
    server: name,
    message: severity === "error"
      ? `Server "${name}" in "${file}" is invalid: ${detail}; fix or remove the entry`
      : detail,
  });
  const parsed = Entry.safeParse(raw);
  if (!parsed.success) return { servers: [], diagnostics: [problem(describeIssues(parsed.error))] };
  const e = parsed.data;
  if (e.enabled === false) return { servers: [], diagnostics: [] };
  const diagnostics: Diagnostic[] = [];
  const fromEnv = (variable: string, field: string): string | undefined => {
    const value = context.env[variable];
    if (value === undefined) {
      diagnostics.push(problem(
        `Environment variable "${variable}" (${field}) is not set: server "${name}" goes without it; ` +
          `export it before starting codemode`,
        "warning",
      ));
    }
    return value;
  };
  const source = { plugin: "codex", file, key: keyPath("mcp_servers", name), scope: "user" };
  // Codex has one startup and one tool timeout; codemode has one per server, so the tool timeout wins.
  const seconds = e.tool_timeout_sec ?? e.startup_timeout_sec;
  const timeoutMs = seconds !== undefined ? seconds * 1000 : e.startup_timeout_ms;
  if (e.url) {
    const headers: Record<string, string> = { ...e.http_headers };
    for (const [header, variable] of Object.entries(e.env_http_headers ?? {})) {
      const value = fromEnv(variable, `env_http_headers.${header}`);
      if (value !== undefined) headers[header] = value;
    }
    if (e.bearer_token_env_var) {
      const token = fromEnv(e.bearer_token_env_var, "bearer_token_env_var");
      if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    }
    const spec: ServerSpec = { name, transport: "http", url: e.url, timeoutMs, source };
    if (Object.keys(headers).length > 0) spec.headers = headers;
    return { servers: [compact(spec)], diagnostics };
  }
  if (!e.command) {
    return { servers: [], diagnostics: [problem("command or url: a server needs one of them")] };
  }
  const env: Record<string, string> = {};
  for (const variable of e.env_vars ?? []) {
    const value = context.env[variable];
    if (value !== undefined) env[variable] = value;
  }
  Object.assign(env, e.env);
  const spec: ServerSpec = {
    name,
    transport: "stdio",
    command: e.command,
    args: e.args,
    env: Object.keys(env).length > 0 ? env : undefined,
    cwd: e.cwd,
    timeoutMs,
    source,
  };
  return { servers: [compact(spec)], diagnostics };
}

async function readCodex(file: string, context: DiscoveryContext): Promise<DiscoveryResult> {
  const { text, diagnostics } = await readText(file);
  if (text === undefined) return { servers: [], diagnostics };
  let root: Record<string, unknown>;
  try {
    root = parse(text);
  } catch (error) {
    const first = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    const reason = error instanceof TomlError ? `${first} at line ${error.line}` : first;
    return {
      servers: [],
      diagnostics: [fileProblem(file, `Cannot parse "${file}": ${reason}; fix the TOML syntax`)],
    };
  }
  const table = root.mcp_servers;
  if (table === undefined) return { servers: [], diagnostics: [] };
  if (!isRecord(table)) {
    const message = `Cannot use "${file}": "mcp_servers" must be a table of servers; fix the file`;
    return { servers: [], diagnostics: [fileProblem(file, message)] };
  }
  const result: DiscoveryResult = { servers: [], diagnostics: [] };
  for (const [name, raw] of Object.entries(table)) {
    const one = entry(name, raw, file, context);
    result.servers.push(...one.servers);
    result.diagnostics.push(...one.diagnostics);
  }
  return result;
}

/** Discovers the servers configured in Codex CLI. */
export function codex(options: CodexOptions = {}): DiscoveryPlugin {
  const { path } = { ...defaults, ...options };
  const locations = (context: DiscoveryContext) =>
    path ? [{ pattern: path, scope: "user" }] : codexLocations(context);
  return {
    name: "codex",
    candidates: (context) => locate(locations(context), context.platform),
    read: readCodex,
  };
}
