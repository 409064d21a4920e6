/**
 * The local skills: every skill folder of every skill directory, loaded into the MCP SDK's `SkillCatalog`
 * (which parses the frontmatter, applies the Agent Skills name rule and `SKILL_LIMITS`, refuses symlinks
 * and path escapes, and serves `skills/list`, `skills/get` and the files to MCP clients). A bad skill is a
 * diagnostic; the others load. The catalog is re-read at most once per `refreshMs` when asked for fresh
 * skills, so skills written by another process show up without a restart.
 * @module
 */
import {
  type SkillCatalog,
  SkillCatalogError,
  SkillsExtension,
  type SkillWarning,
} from "@modelcontextprotocol/server/ext/skills";
import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { type LayeredSkillFiles, layeredSkillFiles, type SkillDiagnostic } from "./layered_files.ts";
import { directoryStamp, type SkillRoot, type SkillsMode } from "./sources.ts";
import { CODE_FILE, MANIFEST_FILE, moduleName, skillFolderName } from "./names.ts";

export { CODE_FILE, MANIFEST_FILE } from "./names.ts";
import { SKILLS_SERVER, type ToolDoc } from "../catalog/docs.ts";

export type { SkillDiagnostic } from "./layered_files.ts";

/** One file of a skill: its path inside the skill folder, size and digest as the catalog published them. */
export interface SkillFileInfo {
  path: string;
  size: number;
  digest: string;
}

/** A skill from a skill directory, as the catalog loaded it. */
export interface LocalSkill {
  /** The folder's name and the frontmatter `name`. */
  name: string;
  /** The Python module name under `skills.`: hyphens become underscores. */
  module: string;
  description: string;
  /** The frontmatter as the SDK read it (name, description, and optional servers, version, ...). */
  frontmatter: Record<string, unknown>;
  /** The `SKILL.md` URI MCP clients see (`skill://<name>/SKILL.md`). */
  uri: string;
  /** The directory it was loaded from. */
  root: SkillRoot;
  files: SkillFileInfo[];
  /** Whether it has a `skill.py` (else it is a documentation skill). */
  hasCode: boolean;
}

/** Options of {@link SkillStore.open}. */
export interface SkillStoreOptions {
  /** Skill directories, best first (see sources.ts). */
  roots: SkillRoot[];
  mode: Exclude<SkillsMode, "off">;
  /** Re-read the directories at most this often when fresh skills are asked for (default 1000 ms). */
  refreshMs?: number;
  /** How the directories are read (tests wrap the default to make files fail). */
  files?: (roots: SkillRoot[]) => LayeredSkillFiles;
}

/** The skills of every skill directory, loaded by the SDK's catalog. */
export class SkillStore {
  readonly roots: readonly SkillRoot[];
  readonly mode: Exclude<SkillsMode, "off">;
  readonly #files: LayeredSkillFiles;
  readonly #refreshMs: number;
  #catalog!: SkillCatalog;
  #skills = new Map<string, LocalSkill>();
  #diagnostics: SkillDiagnostic[] = [];
  #warnings: SkillDiagnostic[] = [];
  #loadedAt = 0;
  /** What the directories looked like (names, sizes, mtimes) when they were last loaded. */
  #stamp = "";
  #loading?: Promise<void>;
  #listeners = new Set<() => void>();
  #manifests = new Map<string, string>();
  #writing: Promise<unknown> = Promise.resolve();

  private constructor(options: SkillStoreOptions) {
    this.roots = options.roots;
    this.mode = options.mode;
    this.#files = (options.files ?? layeredSkillFiles)(options.roots);
    this.#refreshMs = options.refreshMs ?? 1000;
  }

  /** Loads every skill directory. Never throws for a bad skill or directory: see {@link diagnostics}. */
  static async open(options: SkillStoreOptions): Promise<SkillStore> {
    const store = new SkillStore(options);
    await store.reload();
    return store;
  }

  /** The SDK catalog, to attach to an MCP server (`catalog.attach(mcp)`) so its clients get the skills. */
  get catalog(): SkillCatalog {
    return this.#catalog;
  }

  /** The directory skills saved from the sandbox are written to. */
  get userRoot(): SkillRoot {
    return this.roots.find((r) => r.kind === "user") ?? this.roots[0];
  }

  /** The loaded skills, by name. */
  skills(): LocalSkill[] {
    return [...this.#skills.values()];
  }

  /** The skill called `name` (hyphens or underscores), if one is loaded. */
  find(name: string): LocalSkill | undefined {
    return this.#skills.get(skillFolderName(name));
  }

  /** What was wrong in the last load: skipped skills, shadowed ones, unreadable directories. */
  diagnostics(): SkillDiagnostic[] {
    return [...this.#diagnostics];
  }

  /** The `SKILL.md` text of a loaded skill, as read at the last load (for search). */
  manifestText(name: string): string | undefined {
    const skill = this.#skills.get(name);
    return skill && this.#manifests.get(digestOf(skill, MANIFEST_FILE) ?? "");
  }

  /** The skills as search docs: server "skills", tool the name, and the SKILL.md text to search. */
  docs(): ToolDoc[] {
    return this.skills().map((skill) => ({
      server: SKILLS_SERVER,
      tool: skill.name,
      description: skill.description,
      kind: "skill" as const,
      body: this.manifestText(skill.name) ?? "",
    }));
  }

  /** Calls `listener` after every load that changed what is loaded. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Runs `fn` after every earlier write through this store has finished, so saves never interleave. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#writing.then(fn, fn);
    this.#writing = run.catch(() => {});
    return run;
  }

  /**
   * Re-reads the directories when the last load is older than `refreshMs` and a file or folder in them
   * changed since (names, sizes and mtimes are compared: far cheaper than the catalog's hashing).
   */
  async fresh(): Promise<void> {
    if (Date.now() - this.#loadedAt < this.#refreshMs) return;
    if (directoryStamp(this.roots) === this.#stamp) this.#loadedAt = Date.now();
    else await this.reload();
  }

  /** Re-reads every skill directory now; overlapping calls share one load. */
  reload(): Promise<void> {
    this.#loading ??= this.#load().finally(() => (this.#loading = undefined));
    return this.#loading;
  }

  /**
   * The text of one file of a loaded skill. Only files the catalog listed are read, never through a
   * symlink; a file that changed since the last load is read after a reload.
   */
  async readText(name: string, file: string): Promise<string> {
    for (let attempt = 0;; attempt++) {
      const skill = this.find(name);
      if (!skill) throw new RangeError(`No skill named "${name}"`);
      const info = skill.files.find((f) => f.path === file);
      if (!info) throw new RangeError(`Skill "${skill.name}" has no file "${file}"`);
      const folder = await lstat(join(skill.root.path, skill.name)).catch(() => undefined);
      // nodeSkillFiles refuses a symlink as the last component only; a swapped-in folder link is ours to catch.
      if (folder?.isDirectory()) {
        const bytes = await this.#files.read(`${skill.name}/${file}`);
        if (bytes.byteLength === info.size) return new TextDecoder().decode(bytes);
      }
      if (attempt > 0) throw new Error(`Skill "${skill.name}" changed while it was read; try again`);
      await this.reload();
    }
  }

  async #load(): Promise<void> {
    // Taken before reading, so a change made during the load is seen by the next fresh().
    const stamp = directoryStamp(this.roots);
    const warnings: SkillDiagnostic[] = [];
    this.#warnings = warnings;
    const excluded = new Map<string, SkillDiagnostic[]>();
    // A skill whose files can't be read makes the SDK fail the whole load: leave it out and try again.
    for (let loaded = false; !loaded;) {
      this.#files.exclude(excluded.keys());
      warnings.length = 0;
      try {
        if (this.#catalog) await this.#catalog.reload();
        else {
          // Strict: every problem names its skill in the error, which is then left out (not served).
          this.#catalog = await SkillsExtension.load(this.#files, {
            strict: true,
            onWarning: (w) => this.#warn(w),
          });
        }
        loaded = true;
      } catch (error) {
        if (!(error instanceof SkillCatalogError)) throw error;
        const fresh = error.problems.filter((p) => {
          const name = p.path.split("/")[0];
          return name && name !== "." && !excluded.has(name);
        });
        if (!fresh.length) throw error;
        for (const problem of fresh) {
          const name = problem.path.split("/")[0];
          excluded.set(name, [...excluded.get(name) ?? [], this.#located(problem, true)]);
        }
      }
    }
    this.#loadedAt = Date.now();
    this.#stamp = stamp;
    const before = this.#signature();
    const skills = new Map<string, LocalSkill>();
    for (const entry of this.#catalog.entries) {
      const path = new URL(entry.uri).host;
      // Only top-level skill folders are importable; nested ones are still served to MCP clients.
      if (entry.uri !== `skill://${path}/${MANIFEST_FILE}`) continue;
      const root = this.#files.owner(path);
      if (!root) continue;
      const prefix = `skill://${path}/`;
      const files = (entry.resources === "dynamic" ? [] : entry.resources).map((r) => ({
        path: decodeURIComponent(r.uri.slice(prefix.length)),
        size: r.size,
        digest: r.digest,
      }));
      const name = String(entry.frontmatter.name);
      skills.set(name, {
        name,
        module: moduleName(name),
        description: String(entry.frontmatter.description),
        frontmatter: { ...entry.frontmatter },
        uri: entry.uri,
        root,
        files,
        hasCode: files.some((f) => f.path === CODE_FILE),
      });
    }
    this.#skills = skills;
    await this.#readManifests();
    this.#diagnostics = [
      ...this.#files.diagnostics(),
      ...[...excluded.values()].flat(),
      ...warnings,
    ];
    if (this.#signature() !== before) {
      for (const listener of this.#listeners) {
        try {
          listener();
        } catch { /* a listener's failure is its own */ }
      }
    }
  }

  /** Keeps the SKILL.md text of every skill for search, re-reading only those whose digest changed. */
  async #readManifests(): Promise<void> {
    const next = new Map<string, string>();
    await Promise.all(
      this.skills().map(async (skill) => {
        const digest = digestOf(skill, MANIFEST_FILE);
        if (!digest) return;
        const known = this.#manifests.get(digest);
        if (known !== undefined) return void next.set(digest, known);
        try {
          const bytes = await this.#files.read(`${skill.name}/${MANIFEST_FILE}`);
          next.set(digest, new TextDecoder().decode(bytes));
        } catch { /* gone since the load: the next load drops it */ }
      }),
    );
    this.#manifests = next;
  }

  #warn(warning: SkillWarning): void {
    // An empty directory is not a problem worth reporting.
    if (warning.path === "." && /no skills found/.test(warning.message)) return;
    this.#warnings.push(this.#located(warning, false));
  }

  /** A diagnostic whose path names the real file, not the path inside the combined store. */
  #located(warning: SkillWarning, skipped: boolean): SkillDiagnostic {
    const root = this.#files.owner(warning.path.split("/")[0]);
    // The SDK's advice to raise its limits is for servers built on it; codemode's limits are fixed.
    let message = warning.message.replace(/\s*Raise limits to allow it\.?/, "");
    if (skipped && !/skipped/.test(message)) message += " (skill skipped)";
    return { path: root ? join(root.path, warning.path) : warning.path, message };
  }

  #signature(): string {
    return JSON.stringify(this.skills().map((s) => [s.name, s.root.path, s.files]));
  }
}

function digestOf(skill: LocalSkill, file: string): string | undefined {
  return skill.files.find((f) => f.path === file)?.digest;
}
