/**
 * Internals shared by the discovery plugins: locating files, reading JSON(C), and turning one client's
 * server entries into {@link ServerSpec}s with zod checking the shapes at the edge.
 * @module
 */

import { readdir, readFile, stat } from "node:fs/promises";
import { posix, win32 } from "node:path";
import { z } from "zod";
import type {
  Diagnostic,
  DiscoveryContext,
  DiscoveryPlugin,
  DiscoveryResult,
  ServerSpec,
} from "../../core/contracts/discovery.ts";

/** A place a client keeps a config file; `*` in one path segment matches any name in that folder. */
export interface Location {
  pattern: string;
  scope: string;
}

/** Path helpers for the platform being described, which need not be the one we run on. */
export function pathFor(platform: string): typeof posix {
  return platform === "win32" ? win32 : posix;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

function globRegex(pattern: string, star: string): RegExp {
  return new RegExp(
    "^" + pattern.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(star) + "$",
  );
}

async function expand(pattern: string, sep: string): Promise<string[]> {
  const star = pattern.indexOf("*");
  if (star < 0) return await isFile(pattern) ? [pattern] : [];
  const dirEnd = pattern.lastIndexOf(sep, star);
  const segmentEnd = pattern.indexOf(sep, star);
  const dir = pattern.slice(0, dirEnd);
  const segment = pattern.slice(dirEnd + 1, segmentEnd < 0 ? undefined : segmentEnd);
  const rest = segmentEnd < 0 ? "" : pattern.slice(segmentEnd);
  const matcher = globRegex(segment, ".*");
  let names: string[];
  try {
    names = (await readdir(dir || sep)).sort();
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const name of names) {
    // Like a shell glob, `*` skips hidden entries (editor backups such as `.x.json.swp` stay out).
    if (name.startsWith(".") && !segment.startsWith(".")) continue;
    if (matcher.test(name)) found.push(...await expand(dir + sep + name + rest, sep));
  }
  return found;
}

/** The existing files among the locations, in order, each once. Never throws. */
export async function locate(locations: Location[], platform: string): Promise<string[]> {
  const sep = pathFor(platform).sep;
  const found: string[] = [];
  for (const location of locations) {
    for (const path of await expand(location.pattern, sep)) {
      if (!found.includes(path)) found.push(path);
    }
  }
  return found;
}

/** The scope of the first location whose pattern matches the path. */
export function scopeOf(locations: Location[], path: string): string | undefined {
  for (const location of locations) {
    if (globRegex(location.pattern, "[^/\\\\]*").test(path)) return location.scope;
  }
  return undefined;
}

/** Key path of one server, as a user would write it to find the entry: `mcpServers["my-server"]`. */
export function keyPath(prefix: string, name: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(name) ? `${prefix}.${name}` : `${prefix}[${JSON.stringify(name)}]`;
}

/** A file-level problem. */
export function fileProblem(file: string, message: string): Diagnostic {
  return { severity: "error", file, message };
}

/** Reads a text file; an unreadable file becomes a diagnostic. */
export async function readText(file: string): Promise<{ text?: string; diagnostics: Diagnostic[] }> {
  try {
    return { text: await readFile(file, "utf8"), diagnostics: [] };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      diagnostics: [fileProblem(file, `Cannot read "${file}": ${reason}; check that it is readable`)],
    };
  }
}

/** Blanks out `//` and block comments and trailing commas (JSONC, as VS Code writes), keeping offsets. */
export function stripJsonc(text: string): string {
  const out = text.split("");
  let i = 0;
  let lastSignificant = -1;
  while (i < out.length) {
    const c = out[i];
    if (c === '"') {
      let j = i + 1;
      while (j < out.length && out[j] !== '"') j += out[j] === "\\" ? 2 : 1;
      lastSignificant = j;
      i = j + 1;
    } else if (c === "/" && (out[i + 1] === "/" || out[i + 1] === "*")) {
      const end = out[i + 1] === "/" ? text.indexOf("\n", i) : text.indexOf("*/", i + 2) + 2;
      const stop = end < i ? out.length : end;
      for (let k = i; k < stop; k++) if (out[k] !== "\n") out[k] = " ";
      i = stop;
    } else {
      if ((c === "}" || c === "]") && lastSignificant >= 0 && out[lastSignificant] === ",") {
        out[lastSignificant] = " ";
      }
      if (!/\s/.test(c)) lastSignificant = i;
      i++;
    }
  }
  return out.join("");
}

/** Reads and parses a JSON or JSONC file; a broken file becomes a diagnostic. */
export async function loadJson(file: string): Promise<{ root?: unknown; diagnostics: Diagnostic[] }> {
  const { text, diagnostics } = await readText(file);
  if (text === undefined) return { diagnostics };
  try {
    return { root: JSON.parse(text), diagnostics };
  } catch {
    try {
      return { root: JSON.parse(stripJsonc(text)), diagnostics };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return { diagnostics: [fileProblem(file, `Cannot parse "${file}": ${reason}; fix the JSON syntax`)] };
    }
  }
}

/** A plain object (not an array, not null). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Formats zod issues as `path: message; path: message`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join(".") || "(entry)"}: ${issue.message}`).join("; ");
}

// Numbers and booleans in args/env are common hand-edits; clients stringify them, so we do too.
const text = z.union([z.string(), z.number(), z.boolean()]).transform(String);

/**
 * A remote server's `oauth` block: Claude Code writes `clientId`, `callbackPort` and `scopes` (one
 * space-separated string), VS Code `clientId`; codemode also reads `clientSecret`. Unknown keys (such as
 * Claude Code's `authServerMetadataUrl`) are ignored.
 */
export const OAuthEntry = z.object({
  clientId: z.string().min(1).optional(),
  clientSecret: z.string().min(1).optional(),
  scopes: z.union([z.string(), z.array(z.string()).transform((list) => list.join(" "))]).optional(),
  callbackPort: z.number().int().min(1).max(65535).optional(),
});

/** The union of the JSON server-entry shapes the supported clients write. */
export const JsonEntry = z.object({
  type: z.string().optional(),
  command: z.string().min(1).optional(),
  args: z.array(text).optional(),
  env: z.record(z.string(), text).optional(),
  cwd: z.string().optional(),
  url: z.string().min(1).optional(),
  serverUrl: z.string().min(1).optional(),
  httpUrl: z.string().min(1).optional(),
  headers: z.record(z.string(), text).optional(),
  oauth: OAuthEntry.optional(),
  description: z.string().optional(),
  timeout: z.number().positive().optional(),
  disabled: z.boolean().optional(),
});

/** How one client spells remote servers, and any syntax it uses that must be rewritten first. */
export interface Flavour {
  /** Entry keys holding a URL, first match wins; a fixed transport overrides `type`. */
  urlKeys: { key: "url" | "serverUrl" | "httpUrl"; transport?: "http" | "sse" }[];
  /** Rewrites client-only variable syntax into the braced form core expands. */
  rewrite?: (text: string) => string;
}

/** The common flavour: `type` plus `url`. */
export const plainFlavour: Flavour = { urlKeys: [{ key: "url" }] };

/** Where entries come from. */
export interface Where {
  plugin: string;
  file: string;
  scope?: string;
  /** Key path of the server map, e.g. `mcpServers`. */
  prefix: string;
}

/** Maps a client's `type` to a transport; unknown spellings give undefined. */
export function transportOf(type: string): ServerSpec["transport"] | undefined {
  const t = type.toLowerCase().replace(/[-_]/g, "");
  if (t === "stdio") return "stdio";
  if (t === "sse") return "sse";
  if (t === "http" || t === "streamablehttp" || t === "streamable") return "http";
  return undefined;
}

/** Drops undefined fields so specs compare and print cleanly. */
export function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** Applies a rewrite to every field that variables may appear in. */
export function rewriteSpec(spec: ServerSpec, rewrite: (text: string) => string): ServerSpec {
  const map = (r?: Record<string, string>) =>
    r && Object.fromEntries(Object.entries(r).map(([k, v]) => [k, rewrite(v)]));
  return compact({
    ...spec,
    command: spec.command === undefined ? undefined : rewrite(spec.command),
    args: spec.args?.map(rewrite),
    env: map(spec.env),
    cwd: spec.cwd === undefined ? undefined : rewrite(spec.cwd),
    url: spec.url === undefined ? undefined : rewrite(spec.url),
    headers: map(spec.headers),
    oauth: spec.oauth && compact({
      ...spec.oauth,
      clientId: spec.oauth.clientId === undefined ? undefined : rewrite(spec.oauth.clientId),
      clientSecret: spec.oauth.clientSecret === undefined ? undefined : rewrite(spec.oauth.clientSecret),
    }),
  });
}

function entryProblem(where: Where, name: string, detail: string): Diagnostic {
  return {
    severity: "error",
    file: where.file,
    server: name,
    message: `Server "${name}" in "${where.file}" is invalid: ${detail}; fix or remove the entry`,
  };
}

/** Normalises one JSON entry; disabled entries give neither a spec nor a diagnostic. */
export function jsonEntry(
  name: string,
  raw: unknown,
  where: Where,
  flavour: Flavour,
): { spec?: ServerSpec; diagnostic?: Diagnostic } {
  const parsed = JsonEntry.safeParse(raw);
  if (!parsed.success) return { diagnostic: entryProblem(where, name, describeIssues(parsed.error)) };
  const entry = parsed.data;
  if (entry.disabled) return {};
  const urlKey = flavour.urlKeys.find((u) => entry[u.key] !== undefined);
  let transport: ServerSpec["transport"] | undefined;
  if (entry.type !== undefined) {
    transport = transportOf(entry.type);
    if (!transport) {
      return { diagnostic: entryProblem(where, name, `type: unknown transport "${entry.type}"`) };
    }
  } else {
    transport = urlKey ? urlKey.transport ?? "http" : "stdio";
  }
  const source = {
    plugin: where.plugin,
    file: where.file,
    key: keyPath(where.prefix, name),
    scope: where.scope,
  };
  let spec: ServerSpec;
  if (transport === "stdio") {
    if (!entry.command) {
      return { diagnostic: entryProblem(where, name, "command: a stdio server needs a command") };
    }
    spec = {
      name,
      transport,
      command: entry.command,
      args: entry.args,
      env: entry.env,
      cwd: entry.cwd,
      source,
    };
  } else {
    const url = urlKey && entry[urlKey.key];
    if (!url) {
      const keys = flavour.urlKeys.map((u) => u.key).join(" or ");
      return {
        diagnostic: entryProblem(where, name, `${keys}: an ${transport.toUpperCase()} server needs a URL`),
      };
    }
    spec = {
      name,
      transport,
      url,
      headers: entry.headers,
      oauth: entry.oauth && compact(entry.oauth),
      source,
    };
  }
  spec.description = entry.description;
  spec.timeoutMs = entry.timeout;
  spec = compact({ ...spec, source: compact(source) });
  return { spec: flavour.rewrite ? rewriteSpec(spec, flavour.rewrite) : spec };
}

/** Normalises a whole server map (`mcpServers`, `servers`); a missing map is no servers, not a problem. */
export function jsonServerMap(map: unknown, where: Where, flavour: Flavour): DiscoveryResult {
  if (map === undefined) return { servers: [], diagnostics: [] };
  if (!isRecord(map)) {
    const got = Array.isArray(map) ? "an array" : map === null ? "null" : `a ${typeof map}`;
    return {
      servers: [],
      diagnostics: [
        fileProblem(
          where.file,
          `Cannot use "${where.file}": "${where.prefix}" must be an object of servers, got ${got}; fix the file`,
        ),
      ],
    };
  }
  const result: DiscoveryResult = { servers: [], diagnostics: [] };
  for (const [name, raw] of Object.entries(map)) {
    const { spec, diagnostic } = jsonEntry(name, raw, where, flavour);
    if (spec) result.servers.push(spec);
    if (diagnostic) result.diagnostics.push(diagnostic);
  }
  return result;
}

/** Reads a JSON config whose servers sit under one top-level key. */
export async function readJsonServers(
  where: Omit<Where, "prefix">,
  key: string,
  flavour: Flavour,
): Promise<DiscoveryResult> {
  const { root, diagnostics } = await loadJson(where.file);
  if (root === undefined) return { servers: [], diagnostics };
  if (!isRecord(root)) {
    return {
      servers: [],
      diagnostics: [
        fileProblem(
          where.file,
          `Cannot use "${where.file}": expected a JSON object at the top; fix the file`,
        ),
      ],
    };
  }
  return jsonServerMap(root[key], { ...where, prefix: key }, flavour);
}

/** Where desktop apps keep per-user config: Application Support, %APPDATA%, or $XDG_CONFIG_HOME. */
export function appConfigDir(context: DiscoveryContext, app: string): string {
  const path = pathFor(context.platform);
  if (context.platform === "darwin") return path.join(context.home, "Library", "Application Support", app);
  if (context.platform === "win32") {
    return path.join(context.env.APPDATA || path.join(context.home, "AppData", "Roaming"), app);
  }
  return path.join(context.env.XDG_CONFIG_HOME || path.join(context.home, ".config"), app);
}

/** A plugin for a client that keeps servers under one top-level key of JSON files. */
export function jsonPlugin(
  name: string,
  locations: (context: DiscoveryContext) => Location[],
  key: string,
  flavour: Flavour,
): DiscoveryPlugin {
  return {
    name,
    candidates: (context) => locate(locations(context), context.platform),
    read: (file, context) =>
      readJsonServers({ plugin: name, file, scope: scopeOf(locations(context), file) }, key, flavour),
  };
}

/** Keeps the locations whose scope the user asked for. */
export function inScopes(locations: Location[], scopes: readonly string[]): Location[] {
  return locations.filter((location) => scopes.includes(location.scope));
}
