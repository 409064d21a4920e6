/**
 * The tool catalog: tool docs of every configured server, loaded or not, so search covers them all.
 *
 * Each server's tool list is fetched once (in the background, a few servers at a time) and cached on disk
 * under a hash of the server's launch spec; later starts and the CLI read the cache instead of starting
 * servers. A changed spec (new args, env, url) gets a new hash and is listed again. A server that says its
 * tools changed is listed again (debounced, at most once per `refreshIntervalMs`), and tools that were not
 * in its first listing are marked with when they appeared. The search index is built in slices that yield
 * to the event loop, and rebuilt only when a search needs it.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { DocsCache, specKey, type ToolProblem } from "./cache.ts";
import { type SearchHit, type SearchOptions, ToolIndex } from "./index.ts";
import {
  SKILLS_SERVER,
  type ToolDoc,
  toolDoc,
  type ToolFull,
  toolFull,
  type ToolSummary,
  toolSummary,
} from "./docs.ts";

/** A server's tools, with the problems of those its listing could not bring in (see core/upstream/tool_caps.ts). */
export interface ToolListing {
  tools: Tool[];
  problems?: ToolProblem[];
}

export { specKey, type ToolProblem } from "./cache.ts";

/** Lists a server's tools (starting it if need be). */
export type ToolLister = (spec: ServerSpec) => Promise<Tool[] | ToolListing>;

/** A skill an upstream server publishes through the MCP skills extension (its frontmatter's name and description). */
export interface UpstreamSkillInfo {
  name: string;
  description: string;
}

/** Lists the skills a server publishes (none when it does not declare the skills extension). */
export type SkillLister = (spec: ServerSpec) => Promise<UpstreamSkillInfo[]>;

/** Where a server's docs stand: queued, read from cache, being listed, listed, or listing failed. */
export type IndexState = "pending" | "cached" | "indexing" | "ready" | "failed";

/** The indexing status of one server. */
export interface ServerIndexStatus {
  server: string;
  state: IndexState;
  /** Number of tools known for the server. */
  tools: number;
  /** Why listing failed (state `failed`); older docs, if any, are kept. */
  error?: string;
  /** Tools of its listing left out of the catalog, or kept with a caveat, and why. */
  problems: ToolProblem[];
}

/**
 * Progress of a catalog build: `done` of `total` servers have settled; `server` is the one that just
 * changed state (`indexing` when its listing starts).
 */
export interface CatalogProgress {
  done: number;
  total: number;
  server: string;
  state: IndexState;
}

/** Options of {@link ToolCatalog}. */
export interface ToolCatalogOptions {
  /** The state directory; the cache lives in `<stateDir>/tool-docs/`. */
  stateDir: string;
  /** Servers listed at the same time. */
  concurrency?: number;
  /** Give up on listing one server after this long. */
  timeoutMs?: number;
  /** Called whenever a server settles (cached, ready or failed). */
  onProgress?: (progress: CatalogProgress) => void;
  /** Lists the skills each server publishes, after its tools; they are searched with the tools. */
  skillLister?: SkillLister;
  /** After a server says its tools changed, wait this long for more such notices before listing it. */
  debounceMs?: number;
  /** List one server again at most this often, however often it says its tools changed. */
  refreshIntervalMs?: number;
}

/** Defaults of {@link ToolCatalogOptions}. */
export const defaults = { concurrency: 4, timeoutMs: 30_000, debounceMs: 300, refreshIntervalMs: 5_000 };

const CLOSED = "The tool catalog was closed before this server was listed";

interface Entry {
  spec: ServerSpec;
  key: string;
  status: ServerIndexStatus;
  docs: ToolDoc[];
  /** Skills the server publishes, as docs of server "skills" and tool "<server>/<name>". */
  skills: ToolDoc[];
  settled: Promise<void>;
  settle: () => void;
  /** Whether this server already counts as done for progress (a later refresh does not count again). */
  counted: boolean;
  problems: ToolProblem[];
  /** The tool names of the server's first listing (or cached docs); later tools are marked as added. */
  firstNames?: Set<string>;
  /** A refresh asked for by `toolsChanged`, not yet run. */
  refreshTimer?: ReturnType<typeof setTimeout>;
  /** When the server was last listed again after a change. */
  refreshedAt: number;
}

/** Tool docs of all configured servers, indexed in the background and cached on disk. */
export class ToolCatalog {
  readonly #entries = new Map<string, Entry>();
  readonly #lister: ToolLister;
  readonly #options: ToolCatalogOptions & typeof defaults;
  readonly #cache: DocsCache;
  #started?: Promise<void>;
  #queue: Entry[] = [];
  #closed = false;
  /** The search index, built for `#indexed` (a count of changes), and the build under way. */
  #index?: ToolIndex;
  #indexed = -1;
  #changes = 0;
  #building?: { changes: number; index: Promise<ToolIndex> };
  #done = 0;
  #localSkills: ToolDoc[] = [];

  /** A catalog of `specs`; nothing happens until {@link start} or {@link ready}. */
  constructor(specs: readonly ServerSpec[], lister: ToolLister, options: ToolCatalogOptions) {
    this.#lister = lister;
    this.#options = {
      ...options,
      concurrency: Math.max(1, options.concurrency ?? defaults.concurrency),
      timeoutMs: options.timeoutMs ?? defaults.timeoutMs,
      debounceMs: options.debounceMs ?? defaults.debounceMs,
      refreshIntervalMs: options.refreshIntervalMs ?? defaults.refreshIntervalMs,
    };
    this.#cache = new DocsCache(options.stateDir);
    for (const spec of specs) this.#entries.set(spec.name, newEntry(spec));
  }

  /** Begins indexing in the background: cache first, then listing with bounded concurrency. Never throws. */
  start(): Promise<void> {
    this.#started ??= this.#run();
    return this.#started;
  }

  /** Waits until `server` (or every server) has settled; starts indexing if needed. Never rejects. */
  async ready(server?: string): Promise<void> {
    void this.start();
    if (server === undefined) await Promise.all([...this.#entries.values()].map((e) => e.settled));
    else await this.#entries.get(server)?.settled;
  }

  /** Configured server names, in spec order. */
  servers(): string[] {
    return [...this.#entries.keys()];
  }

  /** Indexing status of every server. */
  status(): ServerIndexStatus[] {
    return [...this.#entries.values()].map((e) => ({ ...e.status, problems: [...e.problems] }));
  }

  /** Docs known so far, of one server or all. */
  docs(server?: string): ToolDoc[] {
    if (server !== undefined) return [...this.#entries.get(server)?.docs ?? []];
    return [...this.#entries.values()].flatMap((e) => e.docs);
  }

  /** Summaries of a server's tools. */
  summaries(server: string): ToolSummary[] {
    return this.docs(server).map(toolSummary);
  }

  /** Full docs of a server's tools, or of the one tool named `tool` (by name or Python alias). */
  full(server: string, tool?: string): ToolFull[] {
    const all = this.docs(server).map(toolFull);
    return tool === undefined ? all : all.filter((t) => t.tool === tool || t.alias === tool);
  }

  /** Skill docs known so far: the local skills, then those upstream servers publish. */
  skillDocs(): ToolDoc[] {
    return [...this.#localSkills, ...[...this.#entries.values()].flatMap((e) => e.skills)];
  }

  /** Replaces the local skills' docs (they are searched with the tools, as server "skills"). */
  setSkillDocs(docs: readonly ToolDoc[]): void {
    this.#localSkills = docs.map((d) => ({ ...d, server: SKILLS_SERVER, kind: "skill" as const }));
    this.#changes++;
  }

  /**
   * Searches everything indexed so far: tools and skills. The index is rebuilt when the docs changed
   * since it was built, in slices that yield to the event loop; concurrent searches share one build.
   */
  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    // A skill is no server's tool: asking for one server's tools leaves skills out.
    return (await this.#currentIndex()).search(query, options);
  }

  /**
   * The index of the current docs: the one built, else the build under way for them. One build runs at a
   * time: when the docs change during a build, it is abandoned for a build of the newer docs.
   */
  #currentIndex(): Promise<ToolIndex> {
    if (this.#index && this.#indexed === this.#changes) return Promise.resolve(this.#index);
    const changes = this.#changes;
    if (this.#building?.changes !== changes) {
      const index = ToolIndex.build([...this.docs(), ...this.skillDocs()], {}, {
        abandoned: () => this.#changes !== changes,
      }).then((built) => {
        if (!built) return this.#currentIndex();
        if (changes > this.#indexed) [this.#index, this.#indexed] = [built, changes];
        return built;
      });
      this.#building = { changes, index };
    }
    return this.#building.index;
  }

  /**
   * Replaces a server's docs after its tool list changed: with `tools` when the caller already has the new
   * list (e.g. the pool restarted the server), else by listing again.
   */
  async refresh(server: string, tools?: Tool[] | ToolListing): Promise<void> {
    const entry = this.#entries.get(server);
    if (!entry) {
      throw new RangeError(`Unknown server "${server}": refresh one of ${this.servers().join(", ")}`);
    }
    // Listed here and now, so a queued background listing would only repeat it.
    this.#queue = this.#queue.filter((queued) => queued !== entry);
    if (tools) await this.#accept(entry, tools);
    else await this.#list(entry);
  }

  /**
   * Adds a server after start-up (one sandbox code added from a registry) and indexes it now, so its tools
   * are searchable at once: with `tools` when the caller listed them already, else by listing it. From then
   * on it is a server like the others (refresh() re-lists it after its tool list changed).
   */
  async addServer(spec: ServerSpec, tools?: Tool[]): Promise<void> {
    if (this.#entries.has(spec.name)) throw new RangeError(`Server "${spec.name}" is in the catalog already`);
    this.#entries.set(spec.name, newEntry(spec));
    await this.refresh(spec.name, tools);
  }

  /** Drops a server and its docs from search (a removed server); false when it was not there. */
  removeServer(name: string): boolean {
    const entry = this.#entries.get(name);
    if (!entry) return false;
    this.#entries.delete(name);
    clearTimeout(entry.refreshTimer);
    this.#queue = this.#queue.filter((queued) => queued !== entry);
    if (entry.counted) this.#done--;
    this.#changes++;
    entry.settle();
    return true;
  }

  /**
   * The server said its tools changed: list it again once it has been quiet for `debounceMs`, and at most
   * once per `refreshIntervalMs` however often it says so (a server that floods the notice costs one
   * listing per interval).
   */
  toolsChanged(server: string): void {
    const entry = this.#entries.get(server);
    if (!entry || this.#closed) return;
    clearTimeout(entry.refreshTimer);
    const due = Math.max(
      this.#options.debounceMs,
      entry.refreshedAt + this.#options.refreshIntervalMs - Date.now(),
    );
    entry.refreshTimer = setTimeout(() => {
      entry.refreshTimer = undefined;
      entry.refreshedAt = Date.now();
      void this.refresh(server);
    }, due);
    (entry.refreshTimer as { unref?: () => void }).unref?.();
  }

  async #run(): Promise<void> {
    const entries = [...this.#entries.values()];
    const missing: Entry[] = [];
    await Promise.all(entries.map(async (entry) => {
      const docs = await this.#cache.read(entry.spec, entry.key);
      if (docs) {
        entry.docs = docs.tools;
        entry.skills = docs.skills;
        entry.problems = docs.problems;
        entry.firstNames = new Set(docs.tools.map((d) => d.tool));
        this.#settle(entry, { state: "cached" });
      } else missing.push(entry);
    }));
    // Spec order, not cache-read completion order, so progress is predictable.
    missing.sort((a, b) => entries.indexOf(a) - entries.indexOf(b));
    this.#queue = this.#closed ? [] : missing;
    if (this.#closed) {
      for (const entry of missing) {
        this.#settle(entry, { state: "failed", error: CLOSED });
      }
    }
    const workers = Math.max(1, Math.min(this.#options.concurrency, this.#queue.length));
    await Promise.all(Array.from({ length: workers }, async () => {
      for (let entry = this.#queue.shift(); entry; entry = this.#queue.shift()) await this.#list(entry);
    }));
  }

  /** Stops starting servers: queued ones settle as failed; listings under way finish on their own. */
  close(): Promise<void> {
    this.#closed = true;
    for (const entry of this.#entries.values()) clearTimeout(entry.refreshTimer);
    for (const entry of this.#queue.splice(0)) this.#settle(entry, { state: "failed", error: CLOSED });
    return Promise.resolve();
  }

  async #list(entry: Entry): Promise<void> {
    entry.status = {
      server: entry.spec.name,
      state: "indexing",
      tools: entry.docs.length,
      problems: entry.problems,
    };
    this.#report(entry);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(`Listing tools of "${entry.spec.name}" took over ${this.#options.timeoutMs} ms`),
            ),
          this.#options.timeoutMs,
        );
      });
      const tools = await Promise.race([this.#lister(entry.spec), timeout]);
      // Skills are extra: a server that fails to list them still has its tools.
      const skills = this.#options.skillLister
        ? await Promise.race([this.#options.skillLister(entry.spec), timeout]).catch(() => undefined)
        : undefined;
      await this.#accept(entry, tools, skills);
    } catch (error) {
      this.#settle(entry, { state: "failed", error: error instanceof Error ? error.message : String(error) });
    } finally {
      clearTimeout(timer);
    }
  }

  async #accept(entry: Entry, listed: Tool[] | ToolListing, skills?: UpstreamSkillInfo[]): Promise<void> {
    const { tools, problems = [] } = Array.isArray(listed) ? { tools: listed } : listed;
    // Tools the server did not list at first are marked: a tool that appears mid-session deserves a look.
    const first = entry.firstNames;
    const now = new Date().toISOString();
    const earlier = new Map(entry.docs.map((d) => [d.tool, d.addedAt]));
    entry.docs = tools.map((tool) =>
      toolDoc(
        entry.spec.name,
        tool,
        first && !first.has(tool.name) ? earlier.get(tool.name) ?? now : undefined,
      )
    );
    entry.firstNames ??= new Set(tools.map((t) => t.name));
    entry.problems = problems;
    if (skills) entry.skills = skills.map((skill) => upstreamSkillDoc(entry.spec.name, skill));
    // Written before the server counts as ready, so a CLI that exits right after ready() keeps the cache.
    await this.#cache.write(entry.spec, entry.key, entry).catch(() => {
      // A read-only or full state dir costs a re-list next time, nothing more.
    });
    this.#settle(entry, { state: "ready" });
  }

  #settle(entry: Entry, change: Pick<ServerIndexStatus, "state" | "error">): void {
    entry.status = { server: entry.spec.name, tools: entry.docs.length, problems: entry.problems, ...change };
    if (!change.error) delete entry.status.error;
    this.#changes++;
    if (!entry.counted) {
      entry.counted = true;
      this.#done++;
    }
    entry.settle();
    this.#report(entry);
  }

  #report(entry: Entry): void {
    const progress = {
      done: this.#done,
      total: this.#entries.size,
      server: entry.spec.name,
      state: entry.status.state,
    };
    try {
      this.#options.onProgress?.(progress);
    } catch {
      // A broken progress display must not stop indexing.
    }
  }
}

function newEntry(spec: ServerSpec): Entry {
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => settle = resolve);
  const status: ServerIndexStatus = { server: spec.name, state: "pending", tools: 0, problems: [] };
  return {
    spec,
    key: specKey(spec),
    status,
    docs: [],
    skills: [],
    settled,
    settle,
    counted: false,
    problems: [],
    refreshedAt: 0,
  };
}

/** The doc of a skill an upstream server publishes: found by search, read as `read_skill("<server>/<name>")`. */
export function upstreamSkillDoc(server: string, skill: UpstreamSkillInfo): ToolDoc {
  return {
    server: SKILLS_SERVER,
    tool: `${server}/${skill.name}`,
    description: skill.description,
    kind: "skill",
  };
}
