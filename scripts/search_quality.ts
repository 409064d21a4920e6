/**
 * Measures search quality on a labelled query set (tests/testdata/catalogs/queries.json) over the reference
 * servers' real tool lists plus the 1,200-tool synthetic catalog, compares strategies, and tunes field
 * weights by coordinate ascent on half of the queries (the other half is held out).
 * Run: `deno run -A scripts/search_quality.ts [--tune]`. Results are recorded in docs/search.md.
 * @module
 */
import Fuse, { type IFuseOptions } from "fuse.js";
import { readFileSync } from "node:fs";
import type { Tool } from "@modelcontextprotocol/client";
import {
  SEARCH_FIELDS,
  type SearchField,
  searchFields,
  type ToolDoc,
  toolDoc,
} from "../core/catalog/docs.ts";
import { defaults, queryTerms, ToolIndex, type ToolIndexOptions } from "../core/catalog/index.ts";
import { syntheticCatalog } from "./synthetic_catalog.ts";

const dir = new URL("../tests/testdata/catalogs/", import.meta.url);

/** A labelled query: any of `expect` (`server/tool`) counts as a hit. */
export interface LabelledQuery {
  q: string;
  kind: string;
  expect: string[];
}

/** The labelled queries. */
export const queries: LabelledQuery[] = JSON.parse(readFileSync(new URL("queries.json", dir), "utf8"));

/** The three reference servers' real tool docs. */
export function realDocs(): ToolDoc[] {
  return ["everything", "filesystem", "memory"].flatMap((name) => {
    const { server, tools } = JSON.parse(readFileSync(new URL(`${name}.json`, dir), "utf8"));
    return (tools as Tool[]).map((tool) => toolDoc(server, tool));
  });
}

/** Real docs plus the synthetic catalog. */
export function fullDocs(count = 1200): ToolDoc[] {
  const synthetic = syntheticCatalog(count).flatMap(({ server, tools }) =>
    tools.map((t) => toolDoc(server, t))
  );
  return [...realDocs(), ...synthetic];
}

/** Ranked `server/tool` ids with a score where higher is better. */
type Searcher = (query: string) => { id: string; score: number }[];

/**
 * hits@1, hits@5, mean reciprocal rank (ranks past 10 count as misses), and the mean margin between the
 * best right answer and the best wrong one (positive when the right one wins), which breaks ties in tuning.
 */
export function evaluate(search: Searcher, set: LabelledQuery[]) {
  let at1 = 0, at5 = 0, mrr = 0, margin = 0;
  const misses: string[] = [];
  for (const { q, expect } of set) {
    const ranked = search(q).slice(0, 10);
    const rank = ranked.findIndex((hit) => expect.includes(hit.id));
    if (rank === 0) at1++;
    if (rank >= 0 && rank < 5) at5++;
    if (rank >= 0) mrr += 1 / (rank + 1);
    const right = rank >= 0 ? ranked[rank].score : 0;
    const wrong = ranked.find((hit) => !expect.includes(hit.id))?.score ?? 0;
    margin += right - wrong;
    if (rank !== 0) misses.push(`${q} -> ${rank < 0 ? "miss" : `#${rank + 1}`} (top: ${ranked[0]?.id})`);
  }
  const n = set.length || 1;
  return { at1: at1 / n, at5: at5 / n, mrr: mrr / n, margin: margin / n, misses };
}

function vocab(docs: ToolDoc[], options: Partial<ToolIndexOptions>): Searcher {
  const index = new ToolIndex(docs, { ...options, cacheSize: 0 });
  return (q) => index.search(q, { limit: 10 }).map((h) => ({ id: `${h.server}/${h.tool}`, score: h.score }));
}

type Row = { id: string } & Record<SearchField, string>;

/** Whole-doc fuse.js over the same fields: plain, token search (TF-IDF), or extended (AND of words). */
function fuseDocs(
  docs: ToolDoc[],
  weights: Record<SearchField, number>,
  threshold: number,
  mode: string,
): Searcher {
  const rows: Row[] = docs.map((doc) => {
    const fields = searchFields(doc);
    const text = Object.fromEntries(SEARCH_FIELDS.map((f) => [f, fields[f].join(" ")]));
    return { id: `${doc.server}/${doc.tool}`, ...text } as Row;
  });
  const options: IFuseOptions<Row> = {
    // fuse.js refuses a zero weight; a field weighed 0 is simply not searched.
    keys: SEARCH_FIELDS.filter((name) => weights[name] > 0).map((name) => ({ name, weight: weights[name] })),
    threshold,
    ignoreLocation: true,
    includeScore: true,
    useTokenSearch: mode === "token",
    useExtendedSearch: mode === "extended",
  };
  const fuse = new Fuse(rows, options);
  return (q) => {
    const words = queryTerms(q).join(" ");
    return fuse.search(words, { limit: 10 }).map((r) => ({ id: r.item.id, score: 1 - (r.score ?? 1) }));
  };
}

function objective(r: { at1: number; at5: number; mrr: number; margin: number }): number {
  return r.at1 + r.at5 + r.mrr + 0.1 * r.margin;
}

type Config = Pick<ToolIndexOptions, "weights" | "threshold" | "nameCoverage">;
const GRID = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1];

/** Coordinate ascent over weights, threshold and name coverage on `set`. */
function tune(
  make: (c: Config) => Searcher,
  set: LabelledQuery[],
  start: Config,
  knobs: string[],
  passes = 3,
): Config {
  let best = structuredClone(start);
  let bestScore = objective(evaluate(make(best), set));
  for (let pass = 0; pass < passes; pass++) {
    let improved = false;
    for (const knob of knobs) {
      const values = knob === "threshold"
        ? [0.2, 0.3, 0.4, 0.5, 0.6]
        : knob === "nameCoverage"
        ? [0, 0.1, 0.15, 0.25, 0.35]
        : GRID;
      for (const value of values) {
        const candidate = structuredClone(best);
        if (knob === "threshold" || knob === "nameCoverage") candidate[knob] = value;
        else candidate.weights[knob as SearchField] = value;
        if (knob === "name" && value === 0) continue;
        const score = objective(evaluate(make(candidate), set));
        if (score > bestScore + 1e-9) {
          best = candidate;
          bestScore = score;
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
  return best;
}

function p50(fn: () => void, runs: number): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

function pct(x: number): string {
  return `${(x * 100).toFixed(0)}%`;
}

function row(
  name: string,
  label: string,
  make: (docs: ToolDoc[]) => Searcher,
  real: ToolDoc[],
  full: ToolDoc[],
) {
  const realIds = new Set(real.map((d) => `${d.server}/${d.tool}`));
  const onReal = evaluate(make(real), queries.filter((q) => q.expect.every((e) => realIds.has(e))));
  const searcher = make(full);
  const onFull = evaluate(searcher, queries);
  const latency = p50(() => queries.forEach((q) => searcher(q.q)), 9) / queries.length;
  console.log(
    `| ${name} | ${label} | ${pct(onReal.at1)} | ${pct(onReal.at5)} | ${pct(onFull.at1)} | ${
      pct(onFull.at5)
    } | ${onFull.mrr.toFixed(2)} | ${latency.toFixed(2)} |`,
  );
  if (process.argv.includes("--misses")) console.log(onFull.misses.map((m) => `    ${m}`).join("\n"));
}

if (import.meta.main) {
  const real = realDocs();
  const full = fullDocs();
  const even = queries.filter((_, i) => i % 2 === 0);
  const odd = queries.filter((_, i) => i % 2 === 1);
  const flat: Config = {
    weights: { server: 1, name: 1, title: 1, description: 1, params: 1, paramDocs: 1, body: 1 },
    threshold: 0.4,
    nameCoverage: 0,
  };
  const strategies: Record<string, (docs: ToolDoc[], c: Config) => Searcher> = {
    "fuse whole query": (docs, c) => fuseDocs(docs, c.weights, c.threshold, "plain"),
    "fuse token search": (docs, c) => fuseDocs(docs, c.weights, c.threshold, "token"),
    "fuse extended (AND)": (docs, c) => fuseDocs(docs, c.weights, c.threshold, "extended"),
    "ToolIndex (per-word vocabulary)": (docs, c) => vocab(docs, c),
  };
  const ours = (name: string) => name.startsWith("ToolIndex");
  const doTune = process.argv.includes("--tune");
  console.log(`queries: ${queries.length}; tools: real ${real.length}, full ${full.length}\n`);
  console.log("| strategy | config | real@1 | real@5 | full@1 | full@5 | full MRR | p50 ms/query |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const [name, make] of Object.entries(strategies)) {
    if (process.argv.includes("--ours") && !ours(name)) continue;
    const configs: [string, Config][] = [["flat", flat]];
    if (ours(name)) configs.push(["defaults", defaults]);
    if (doTune) {
      const knobs = [...SEARCH_FIELDS, "threshold", ...(ours(name) ? ["nameCoverage"] : [])];
      const from = ours(name) ? defaults : flat;
      const passes = ours(name) ? 3 : 1;
      if (ours(name)) {
        // Two-fold cross-validation: tune on one half, score the other, so the tuned numbers are honest.
        for (const [train, test, label] of [[even, odd, "even->odd"], [odd, even, "odd->even"]] as const) {
          const tuned = tune((c) => make(full, c), train, from, knobs, passes);
          const r = evaluate(make(full, tuned), test);
          console.log(
            `|  | cv ${label} ${JSON.stringify(tuned)} | | | ${pct(r.at1)} | ${pct(r.at5)} | ${
              r.mrr.toFixed(2)
            } | |`,
          );
        }
      }
      configs.push(["tuned on all", tune((c) => make(full, c), queries, from, knobs, passes)]);
    }
    for (const [label, config] of configs) {
      const text = label === "flat" ? label : `${label} ${JSON.stringify(config)}`;
      row(name, text, (docs) => make(docs, config), real, full);
    }
  }
}
