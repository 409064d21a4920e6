/**
 * Servers kept in codemode's own config file: a server sandbox code added from a registry, which the user
 * chose to keep, is written under `servers:` (never into another client's config) and is a configured
 * server from the next start on. Reading turns each entry into a server spec whose provenance names the
 * file and the registry entry it came from; writing keeps the file's comments and layout (YAML is edited
 * as a document) and leaves it readable by its owner only, since it may hold the values of secrets.
 * @module
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { randomUUID } from "node:crypto";
import { isMap, parseDocument } from "yaml";
import * as z from "zod";
import type { ServerSpec } from "../contracts/discovery.ts";
import { type ConfigFile, userConfigDir } from "./file.ts";

/** The discovery plugin name kept servers carry (`codemode servers` shows it). */
export const KEPT_SOURCE = "codemode";

/** Where a kept server came from. */
export interface RegistryOrigin {
  /** Its registry name. */
  name: string;
  version: string;
  /** The registry's base URL. */
  url: string;
}

/** A kept server's entry under `servers:`. */
const KeptEntry = z.strictObject({
  command: z.string().min(1).optional(),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  url: z.string().min(1).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  description: z.string().optional(),
  registry: z.strictObject({ name: z.string(), version: z.string(), url: z.string() }).optional(),
}).refine((e) => Boolean(e.command) !== Boolean(e.url), "expected either command (stdio) or url (http)");

/** A server spec from codemode's config file, and the registry entry it was added from. */
export interface KeptServer extends ServerSpec {
  registry?: RegistryOrigin;
}

/** The servers under a config file's `servers:` key; a bad entry is a problem, the others still load. */
export function readKeptServers(value: unknown, file: string): { servers: KeptServer[]; problems: string[] } {
  const servers: KeptServer[] = [];
  const problems: string[] = [];
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return {
      servers,
      problems: [`Invalid servers in "${file}": expected a mapping of server names to servers`],
    };
  }
  for (const [name, raw] of Object.entries(value)) {
    const parsed = KeptEntry.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue.path.length ? ` at ${issue.path.join(".")}` : "";
      problems.push(`Invalid server "${name}" in "${file}"${where}: ${issue.message}`);
      continue;
    }
    const e = parsed.data;
    servers.push({
      name,
      transport: e.url ? "http" : "stdio",
      ...(e.command ? { command: e.command, args: e.args ?? [] } : {}),
      ...(e.env ? { env: e.env } : {}),
      ...(e.url ? { url: e.url } : {}),
      ...(e.headers ? { headers: e.headers } : {}),
      ...(e.description ? { description: e.description } : {}),
      ...(e.registry ? { registry: e.registry } : {}),
      source: { plugin: KEPT_SOURCE, file, key: `servers.${name}`, scope: "user" },
    });
  }
  return { servers, problems };
}

/**
 * Writes `spec` under `servers.<name>` of codemode's config file: the file in use (`file`), else the
 * user config file, made if need be. Returns the file's path. The file ends up 0600.
 */
export function keepServer(
  spec: ServerSpec,
  registry: RegistryOrigin,
  file: Pick<ConfigFile, "path"> | undefined,
  env: Record<string, string | undefined> = process.env,
): string {
  const path = file?.path ?? join(userConfigDir(env), "config.yaml");
  const entry = {
    ...(spec.command ? { command: spec.command, args: spec.args ?? [] } : {}),
    ...(spec.env && Object.keys(spec.env).length ? { env: spec.env } : {}),
    ...(spec.url ? { url: spec.url } : {}),
    ...(spec.headers && Object.keys(spec.headers).length ? { headers: spec.headers } : {}),
    ...(spec.description ? { description: spec.description } : {}),
    registry,
  };
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  let out: string;
  if (path.endsWith(".json")) {
    const data = text.trim() ? JSON.parse(text) : {};
    data.servers = { ...data.servers, [spec.name]: entry };
    out = JSON.stringify(data, null, 2) + "\n";
  } else {
    const doc = parseDocument(text);
    if (doc.errors.length) throw new SyntaxError(`Cannot parse config "${path}": ${doc.errors[0].message}`);
    if (!isMap(doc.contents)) doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
    doc.setIn(["servers", spec.name], doc.createNode(entry));
    out = doc.toString();
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // A whole new file, renamed over the old one: a crash midway never leaves half a config.
  const temp = `${path}.${randomUUID()}.tmp`;
  writeFileSync(temp, out, { mode: 0o600 });
  chmodSync(temp, 0o600);
  renameSync(temp, path);
  return path;
}
