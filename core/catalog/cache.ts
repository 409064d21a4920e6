/**
 * The on-disk cache of each server's tool docs, under `<stateDir>/tool-docs/`, one file per launch spec
 * (named by a hash of it), written atomically: later starts and the CLI read it instead of starting
 * servers.
 * @module
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ServerSpec } from "../contracts/discovery.ts";
import { SKILLS_SERVER, type ToolDoc } from "./docs.ts";

/** One tool the server listed that was left out of the catalog (or kept with a caveat), and why. */
export interface ToolProblem {
  tool: string;
  problem: string;
  leftOut: boolean;
}

/** What the cache keeps of one server. */
export interface CachedDocs {
  tools: ToolDoc[];
  skills: ToolDoc[];
  problems: ToolProblem[];
}

// 2: upstream skills are cached with the tools. 3: problems of tools left out are cached too.
const CACHE_VERSION = 3;

interface CacheFile {
  version: number;
  server: string;
  key: string;
  indexedAt: string;
  tools: ToolDoc[];
  skills?: ToolDoc[];
  problems?: ToolProblem[];
}

/** The hash that names a server's cache file: its launch spec, not where the spec was found. */
export function specKey(spec: ServerSpec): string {
  // Absent and empty mean the same launch, whichever way a discovery plugin spells them.
  const sorted = (record?: Record<string, string>) =>
    record && Object.keys(record).length
      ? Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)))
      : null;
  const identity = [
    spec.name,
    spec.transport,
    spec.command || null,
    spec.args ?? [],
    sorted(spec.env),
    spec.cwd || null,
    spec.url || null,
    sorted(spec.headers),
  ];
  return createHash("sha256").update(JSON.stringify(identity)).digest("hex").slice(0, 32);
}

/** The tool-docs cache of one state directory. */
export class DocsCache {
  readonly #dir: string;

  constructor(stateDir: string) {
    this.#dir = join(stateDir, "tool-docs");
  }

  #file(key: string): string {
    return join(this.#dir, `${key}.json`);
  }

  /** The cached docs of `spec` (whose specKey is `key`); undefined when missing, stale or corrupt. */
  async read(spec: ServerSpec, key: string): Promise<CachedDocs | undefined> {
    try {
      const data = JSON.parse(await readFile(this.#file(key), "utf8")) as Partial<CacheFile>;
      const valid = data.version === CACHE_VERSION && data.key === key &&
        data.server === spec.name &&
        Array.isArray(data.tools) &&
        data.tools.every((t) => t && typeof t.tool === "string" && t.server === spec.name);
      const skills = Array.isArray(data.skills)
        ? data.skills.filter((s) => s && typeof s.tool === "string" && s.server === SKILLS_SERVER)
        : [];
      const problems = Array.isArray(data.problems)
        ? data.problems.filter((p) => p && typeof p.tool === "string" && typeof p.problem === "string")
        : [];
      // The cache is the first listing of this process: what was new in an earlier one is not new now.
      const tools = (data.tools ?? []).map(({ addedAt: _, ...doc }) => doc);
      return valid ? { tools, skills, problems } : undefined;
    } catch {
      // Missing or corrupt: list the server again, and the rewrite replaces the bad file.
      return undefined;
    }
  }

  /** Writes the docs of `spec` (whose specKey is `key`), atomically. */
  async write(
    spec: ServerSpec,
    key: string,
    docs: { docs: ToolDoc[]; skills: ToolDoc[]; problems: ToolProblem[] },
  ) {
    const file = this.#file(key);
    const body: CacheFile = {
      version: CACHE_VERSION,
      server: spec.name,
      key,
      indexedAt: new Date().toISOString(),
      tools: docs.docs,
      skills: docs.skills,
      problems: docs.problems,
    };
    await mkdir(this.#dir, { recursive: true });
    const temp = `${file}.${randomUUID()}.tmp`;
    try {
      await writeFile(temp, JSON.stringify(body));
      await rename(temp, file);
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
  }
}
