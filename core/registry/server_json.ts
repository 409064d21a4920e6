/**
 * Registry entries in the `server.json` format, checked at the edge: every entry a registry sends is
 * untrusted data. An entry is validated against the shape codemode reads (name, description, version,
 * packages, remotes and their inputs) with a cap on every string and list, so an oversized or malformed
 * entry is left out with a note and never breaks a search. Nothing here runs anything: launch.ts decides
 * what an entry would run, and whether it may.
 * @module
 */
import * as z from "zod";

/** Caps on what one entry may hold; an entry past any of them is left out. */
export const ENTRY_LIMITS = {
  /** The description codemode shows (the official registry allows 100 characters). */
  description: 2000,
  /** Any other free text (titles, input descriptions, placeholders). */
  text: 1000,
  /** Values an entry fixes (arguments, variables, headers). */
  value: 4096,
  /** Packages, remotes, and the inputs of each. */
  items: 32,
} as const;

const text = z.string().max(ENTRY_LIMITS.text);
const value = z.string().max(ENTRY_LIMITS.value);

/** One input (a variable, header or argument) as server.json describes it. */
const Input = z.object({
  description: text.optional(),
  isRequired: z.boolean().optional(),
  format: z.string().max(32).optional(),
  value: value.optional(),
  isSecret: z.boolean().optional(),
  default: value.optional(),
  placeholder: text.optional(),
  choices: z.array(value).max(ENTRY_LIMITS.items).optional(),
  // Variables fill `{placeholders}` in values; codemode substitutes none, so it only needs to know of them.
  variables: z.record(z.string().max(128), z.unknown()).optional(),
});

/** An environment variable or an HTTP header. */
const KeyValueInput = Input.extend({ name: z.string().min(1).max(256) });

/** A positional or named command-line argument. */
const Argument = Input.extend({
  type: z.enum(["positional", "named"]),
  name: z.string().max(256).optional(),
  valueHint: z.string().max(256).optional(),
  isRepeated: z.boolean().optional(),
});

const Transport = z.object({
  type: z.string().max(64),
  url: z.string().max(2048).optional(),
  headers: z.array(KeyValueInput).max(ENTRY_LIMITS.items).optional(),
  variables: z.record(z.string().max(128), z.unknown()).optional(),
});

const Package = z.object({
  registryType: z.string().min(1).max(64),
  registryBaseUrl: z.string().max(2048).optional(),
  identifier: z.string().min(1).max(512),
  version: z.string().min(1).max(255).optional(),
  runtimeHint: z.string().max(64).optional(),
  transport: Transport.optional(),
  runtimeArguments: z.array(Argument).max(ENTRY_LIMITS.items).optional(),
  packageArguments: z.array(Argument).max(ENTRY_LIMITS.items).optional(),
  environmentVariables: z.array(KeyValueInput).max(ENTRY_LIMITS.items).optional(),
});

/** The parts of `server.json` codemode reads; everything else is dropped. */
const ServerJson = z.object({
  name: z.string().min(3).max(200).regex(
    /^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/,
    "expected a reverse-DNS name with one slash, such as io.github.user/weather",
  ),
  description: z.string().max(ENTRY_LIMITS.description).optional(),
  title: text.optional(),
  version: z.string().min(1).max(255),
  websiteUrl: z.string().max(2048).optional(),
  repository: z.object({ url: z.string().max(2048).optional() }).optional(),
  packages: z.array(Package).max(ENTRY_LIMITS.items).optional(),
  remotes: z.array(Transport).max(ENTRY_LIMITS.items).optional(),
});

/** One input of an entry. */
export type EntryInput = z.output<typeof Input>;
/** A variable or header of an entry. */
export type EntryKeyValue = z.output<typeof KeyValueInput>;
/** A command-line argument of an entry. */
export type EntryArgument = z.output<typeof Argument>;
/** A package of an entry: npm, pypi, oci, ... */
export type EntryPackage = z.output<typeof Package>;
/** A remote endpoint of an entry, or a package's transport. */
export type EntryTransport = z.output<typeof Transport>;

/** A validated registry entry: its server.json, and what the registry says about it. */
export interface RegistryEntry {
  server: z.output<typeof ServerJson>;
  /** The registry's lifecycle status ("active", "deprecated"); entries marked "deleted" are left out. */
  status?: string;
}

/** An entry the registry sent that codemode left out, and why (said in find_servers' notes). */
export interface LeftOut {
  /** The entry's name when it has a readable one. */
  name?: string;
  why: string;
}

/**
 * Validates one item of a registry answer: the v0.1 shape `{server, _meta}`, or a bare server.json as
 * older registries send. Returns the entry, or why it was left out; never throws.
 */
export function parseEntry(item: unknown): { entry: RegistryEntry } | { leftOut: LeftOut } {
  if (!isRecord(item)) return { leftOut: { why: "an item that is not an object" } };
  const wrapped = isRecord(item.server);
  const raw = wrapped ? item.server as Record<string, unknown> : item;
  const name = typeof raw.name === "string" && raw.name.length <= 200 ? clean(raw.name) : undefined;
  const parsed = ServerJson.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length ? `${issue.path.join(".")}: ` : "";
    return {
      leftOut: { ...(name ? { name } : {}), why: `not a valid server.json (${where}${issue.message})` },
    };
  }
  const official = isRecord(item._meta) ? item._meta["io.modelcontextprotocol.registry/official"] : undefined;
  const status = isRecord(official) && typeof official.status === "string"
    ? official.status.slice(0, 32)
    : undefined;
  if (status === "deleted") return { leftOut: { name: parsed.data.name, why: "deleted from the registry" } };
  return { entry: { server: parsed.data, ...(status ? { status } : {}) } };
}

/**
 * Text from a registry made safe to show: C0 and C1 control characters (terminal escapes among them) and
 * bidirectional overrides are dropped, whitespace runs become one space.
 */
export function clean(text: string, max: number = ENTRY_LIMITS.description): string {
  // deno-lint-ignore no-control-regex
  const shown = text.replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]+/g, " ")
    .replace(/\s+/g, " ").trim();
  return shown.length > max ? `${shown.slice(0, max - 1)}…` : shown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
