/**
 * `codemode search <query> [--limit N] [--server S] [--json]`: searches the tool docs of every configured
 * server. Reads the on-disk cache; servers missing from it are listed first (progress bar on a terminal).
 * Imports no MCP client or runtime: the caller's `lister` decides how servers are started.
 * @module
 */
import type { ServerSpec } from "../core/contracts/discovery.ts";
import {
  type CatalogProgress,
  type SkillLister,
  ToolCatalog,
  type ToolLister,
} from "../core/catalog/catalog.ts";
import type { ToolDoc } from "../core/catalog/docs.ts";
import { Policy } from "../core/config/policy.ts";
import pc from "picocolors";
import { escapeControls, escapeDeep, safeJson, unguarded } from "./_terminal_guard.ts";

/** What the catalog commands need from the CLI wiring. */
export interface CatalogDeps {
  /** Every configured server. */
  specs: ServerSpec[];
  /** codemode's state directory (the cache lives in `<stateDir>/tool-docs/`). */
  stateDir: string;
  /** Lists a server's tools, starting it if need be. */
  lister: ToolLister;
  /** Lists the skills a server publishes; without it (skills off) published skills are not searched. */
  skillLister?: SkillLister;
  /** The local skills as search docs; without it (skills off) they are not searched. */
  skillDocs?: () => Promise<ToolDoc[]>;
  /** Servers and tools it refuses are neither started nor shown (default: everything allowed). */
  policy?: Policy;
  /** Where results go, in newline-terminated chunks (default: process stdout). */
  stdout?: (s: string) => void;
  /** Where warnings go, in newline-terminated chunks (default: process stderr). */
  stderr?: (s: string) => void;
  /** Whether a person is watching (default: whether stderr is a terminal). */
  isTTY?: boolean;
  /** Terminal width for tables (default: stdout's columns, else 100). */
  columns?: number;
}

/** Options of {@link runSearch}. */
export interface SearchCommandOptions {
  limit: number;
  server?: string;
  json: boolean;
}

/** Runs `codemode search`; returns the exit code. */
export async function runSearch(
  query: string,
  opts: SearchCommandOptions,
  deps: CatalogDeps,
): Promise<number> {
  const io = terminal(deps);
  if (!Number.isInteger(opts.limit) || opts.limit < 1) {
    io.err(`Invalid --limit "${opts.limit}": give a whole number of 1 or more`);
    return 2;
  }
  if (!query.trim()) {
    io.err(`Empty query: give words to search for, e.g. codemode search "read file"`);
    return 2;
  }
  const policy = deps.policy ?? new Policy();
  if (opts.server !== undefined) {
    const refused = policy.allowsServer(opts.server);
    if (!refused.ok) {
      io.err(refused.reason);
      return 1;
    }
  }
  const allowed = deps.specs.filter((s) => policy.allowsServer(s.name).ok);
  const specs = opts.server === undefined ? allowed : allowed.filter((s) => s.name === opts.server);
  if (opts.server !== undefined && !specs.length) {
    io.err(`Unknown server "${opts.server}": run codemode servers to see the configured ones`);
    return 1;
  }
  if (!specs.length) io.err("No MCP servers are configured: codemode servers shows where codemode looked");
  const catalog = await indexedCatalog(specs, deps, io);
  const failed = catalog.status().filter((s) => s.state === "failed");
  for (const s of failed) io.err(escapeControls(`Could not list the tools of "${s.server}": ${s.error}`));
  if (opts.server === undefined && deps.skillDocs) catalog.setSkillDocs(await deps.skillDocs());
  if (specs.length && failed.length === specs.length && !catalog.skillDocs().length) return 1;

  const skills = Boolean(deps.skillDocs);
  const hits = policy.open && skills
    ? await catalog.search(query, { limit: opts.limit, server: opts.server })
    : await allowedHits(catalog, policy, query, opts, skills);
  if (opts.json) {
    io.out(safeJson(hits));
    return 0;
  }
  if (!hits.length) {
    io.out(
      `No tools match "${
        escapeControls(query)
      }" in ${catalog.docs().length} tools of ${specs.length} servers`,
    );
    return 0;
  }
  const width = Math.max(60, deps.columns || process.stdout.columns || 100);
  // Names fit whole when they can (cells are padded by one space each side); descriptions wrap.
  const serverWidth = Math.min(24, Math.max(8, ...hits.map((h) => h.server.length + 2)));
  const toolWidth = Math.min(40, Math.max(6, ...hits.map((h) => h.tool.length + 2)));
  const fixed = 7 + serverWidth + toolWidth + 5;
  // Loaded here, not at the top: it costs ~60 ms and --json never needs it.
  const { default: Table } = await import("cli-table3");
  const table = new Table({
    head: ["score", "server", "tool", "description"].map((h) => io.color.bold(h)),
    colWidths: [7, serverWidth, toolWidth, Math.max(20, width - fixed)],
    wordWrap: true,
    style: { head: [], border: [] },
  });
  for (const hit of escapeDeep(hits)) {
    table.push([
      hit.score.toFixed(2),
      io.color.cyan(hit.server),
      io.color.green(hit.tool),
      firstSentence(hit.description, 160),
    ]);
  }
  io.out(table.toString());
  return 0;
}

/** A catalog of `specs` with every server settled; shows a progress bar while servers are being listed. */
export async function indexedCatalog(
  specs: ServerSpec[],
  deps: CatalogDeps,
  io: Terminal,
): Promise<ToolCatalog> {
  let bar: { update(done: number, payload: object): void; stop(): void } | undefined;
  let pending: Promise<void> | undefined;
  const onProgress = (p: CatalogProgress) => {
    if (!io.tty) return;
    if (!bar && !pending && p.state === "indexing") {
      pending = import("cli-progress").then(({ SingleBar }) => {
        const b = new SingleBar({
          format: "Indexing tool docs {bar} {value}/{total} {server}",
          stream: unguarded(process.stderr),
          clearOnComplete: true,
          hideCursor: true,
        });
        b.start(p.total, p.done, { server: escapeControls(p.server) });
        bar = b;
      });
    }
    bar?.update(p.done, { server: escapeControls(p.server) });
  };
  const catalog = new ToolCatalog(specs, deps.lister, {
    stateDir: deps.stateDir,
    onProgress,
    skillLister: deps.skillLister,
  });
  await catalog.ready();
  await pending;
  bar?.stop();
  return catalog;
}

/** Output streams and colours, as the CLI commands use them. */
export interface Terminal {
  out: (s: string) => void;
  err: (s: string) => void;
  tty: boolean;
  color: ReturnType<typeof pc.createColors>;
}

/** Resolves the output side of `deps`; colour only on a terminal and never when NO_COLOR is set. */
export function terminal(deps: CatalogDeps): Terminal {
  const tty = deps.isTTY ?? Boolean(process.stderr.isTTY);
  const noColor = Boolean(process.env.NO_COLOR);
  const stdout = deps.stdout ?? ((s: string) => void process.stdout.write(s));
  const stderr = deps.stderr ?? ((s: string) => void process.stderr.write(s));
  return {
    out: (s) => stdout(s + "\n"),
    err: (s) => stderr(s + "\n"),
    tty,
    color: pc.createColors(tty && !noColor),
  };
}

/** The first sentence (or line) of a description, cut to `max` characters. */
export function firstSentence(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  const end = flat.search(/[.!?](\s|$)/);
  const sentence = end >= 0 ? flat.slice(0, end + 1) : flat;
  return sentence.length > max ? sentence.slice(0, max - 1) + "…" : sentence;
}

/**
 * Search hits the policy allows (and skills only when they are on): more are asked for, so refused tools
 * don't leave the list short.
 */
async function allowedHits(
  catalog: ToolCatalog,
  policy: Policy,
  query: string,
  opts: SearchCommandOptions,
  skills: boolean,
) {
  const annotations = new Map(catalog.docs().map((d) => [`${d.server}\0${d.tool}`, d.annotations]));
  return (await catalog.search(query, { limit: Math.max(100, opts.limit), server: opts.server }))
    .filter((hit) =>
      hit.kind === "skill"
        ? skills
        : policy.allowsTool(hit.server, hit.tool, annotations.get(`${hit.server}\0${hit.tool}`)).ok
    )
    .slice(0, opts.limit);
}
