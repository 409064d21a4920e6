/**
 * The dashboard's skills panel: the skills of every skill directory, read as `codemode skills list` reads
 * them (core/skills' `SkillStore`, over the SDK's skills catalog), with where each comes from, its
 * frontmatter's version and servers, the `SKILL.md` text, and the names of the public functions its
 * `skill.py` defines at top level (a cheap look at the `def` lines, cached by the file's digest; the
 * sandbox's `ast` pass stays the authority on what a skill exports).
 * @module
 */
import { clip } from "../observe/activity.ts";
import type { SkillsMode } from "../skills/sources.ts";
import { CODE_FILE } from "../skills/names.ts";
import type { LocalSkill, SkillStore } from "../skills/store.ts";

/** One skill as the page shows it. */
export interface SkillView {
  name: string;
  /** What Python imports: `skills.<module>`. */
  module: string;
  description: string;
  /** "code" with a skill.py, else "docs". */
  kind: "code" | "docs";
  /** Which directory it came from: project, user or config. */
  source: string;
  /** That directory. */
  directory: string;
  version?: string;
  servers?: string[];
  /** Public functions defined at the top level of skill.py. */
  functions: string[];
  /** The SKILL.md text (clipped). */
  manifest: string;
}

/** What `/api/skills` answers. */
export interface SkillsView {
  mode: SkillsMode;
  directories: { path: string; kind: string }[];
  skills: SkillView[];
  /** Skills that were skipped or shadowed, and why. */
  diagnostics: { path: string; message: string }[];
}

/** Longest SKILL.md text sent to the page. */
const MAX_MANIFEST = 16 * 1024;
const TOP_LEVEL_DEF = /^(?:async[ \t]+)?def[ \t]+([A-Za-z][A-Za-z0-9_]*)[ \t]*\(/gm;

/** The skills panel of one dashboard: reads the store fresh on each call, code only when it changed. */
export class SkillsPanel {
  #functions = new Map<string, string[]>();

  /** A panel over `store` (undefined when skills are off or could not be loaded). */
  constructor(readonly store: () => Promise<SkillStore | undefined>, readonly mode: SkillsMode) {}

  /** The skills now. */
  async view(): Promise<SkillsView> {
    const store = await this.store();
    if (!store) return { mode: this.mode, directories: [], skills: [], diagnostics: [] };
    await store.fresh();
    const skills = await Promise.all(store.skills().map((skill) => this.#skill(store, skill)));
    return {
      mode: this.mode,
      directories: store.roots.map((r) => ({ path: r.path, kind: r.kind })),
      skills: skills.sort((a, b) => a.name.localeCompare(b.name)),
      diagnostics: store.diagnostics(),
    };
  }

  async #skill(store: SkillStore, skill: LocalSkill): Promise<SkillView> {
    const { version, servers } = skill.frontmatter;
    return {
      name: skill.name,
      module: skill.module,
      description: skill.description,
      kind: skill.hasCode ? "code" : "docs",
      source: skill.root.kind,
      directory: skill.root.path,
      ...(version !== undefined ? { version: String(version) } : {}),
      ...(Array.isArray(servers) ? { servers: servers.map(String) } : {}),
      functions: skill.hasCode ? await this.#functionsOf(store, skill) : [],
      manifest: clip(store.manifestText(skill.name) ?? "", MAX_MANIFEST),
    };
  }

  async #functionsOf(store: SkillStore, skill: LocalSkill): Promise<string[]> {
    const digest = skill.files.find((f) => f.path === CODE_FILE)?.digest ?? "";
    const known = this.#functions.get(digest);
    if (known) return known;
    let names: string[] = [];
    try {
      const code = await store.readText(skill.name, CODE_FILE);
      names = [...code.matchAll(TOP_LEVEL_DEF)].map((m) => m[1]);
    } catch { /* changed or gone since the load: no functions shown this time */ }
    if (this.#functions.size > 1000) this.#functions.clear();
    this.#functions.set(digest, [...new Set(names)]);
    return this.#functions.get(digest)!;
  }
}
