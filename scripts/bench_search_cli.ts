/**
 * Section "search" (issue 3): in-process query latency over 1,200+ tools (bench_search.ts) against a
 * plain substring scan of the same docs, and whole `codemode search --json` processes over a populated
 * cache (from source and the compiled binary) against the same program's `--version`.
 * @module
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { toolDoc } from "../core/catalog/docs.ts";
import { benchProcess, benchQueries, benchSearch, benchServers, populateCache } from "./bench_search.ts";
import {
  BINARY,
  fakeHome,
  percentile,
  removeHome,
  row,
  type SectionResult,
  sourceCommand,
} from "./bench_harness.ts";

/** Counts of the search section. */
export const counts = { processRuns: 20, query: "read file" };

/** p50 of one naive pass per query: every doc's text lower-cased and checked for every word. */
function substringScanP50(): number {
  const docs = benchServers().flatMap(({ server, tools }) => tools.map((t) => toolDoc(server, t)));
  const texts = docs.map((d) => JSON.stringify(d).toLowerCase());
  const queries = benchQueries();
  const times: number[] = [];
  for (let pass = 0; pass < 21; pass++) {
    for (const q of queries) {
      const words = q.toLowerCase().split(/\s+/).filter(Boolean);
      const start = performance.now();
      texts.filter((t) => words.some((w) => t.includes(w))).slice(0, 10);
      if (pass > 0) times.push(performance.now() - start);
    }
  }
  return percentile(times, 0.5);
}

/** Runs the search section. */
export async function benchSearchSection(): Promise<SectionResult> {
  const result: SectionResult = { name: "search", rows: [], notes: [] };
  const inProcess = benchSearch();
  result.rows.push(
    row({
      section: "search",
      metric: `in-process query p50 (${inProcess.toolCount} tools, ${inProcess.queryCount} queries × 20)`,
      value: inProcess.inProcessP50Ms,
      unit: "ms",
      baseline: { label: "naive substring scan of the same docs (p50)", value: substringScanP50() },
      goal: { on: "value", op: "≤", limit: 2 },
      note: `p95 ${inProcess.inProcessP95Ms} ms; index built in ${inProcess.buildMs.toFixed(0)} ms`,
    }),
  );

  const home = fakeHome(() => ({}));
  try {
    const state = join(home, "state");
    const specs = await populateCache(state);
    mkdirSync(join(home, "MCPs"), { recursive: true });
    const servers = Object.fromEntries(specs.map((s) => [s.name, { command: s.command, args: s.args }]));
    writeFileSync(join(home, "MCPs", "servers.json"), JSON.stringify({ mcpServers: servers }));
    const env = { HOME: home, CODEMODE_STATE_DIR: state, NO_COLOR: "1" };
    const programs: [string, string[]][] = [["from source (deno run -A cli.ts)", sourceCommand()]];
    if (existsSync(BINARY)) programs.push(["dist/codemode", [BINARY]]);
    else result.notes.push("dist/codemode is missing (deno task compile): only the source figure was taken");
    for (const [label, command] of programs) {
      const search = await benchProcess([...command, "search", counts.query, "--json"], {
        runs: counts.processRuns,
        env,
        cwd: home,
      });
      const version = await benchProcess([...command, "--version"], {
        runs: counts.processRuns,
        env,
        cwd: home,
      });
      result.rows.push(row({
        section: "search",
        metric: `codemode search "${counts.query}" --json, ${label}, p50 of ${counts.processRuns}`,
        value: search.p50Ms,
        unit: "ms",
        baseline: { label: "codemode --version, same program (p50)", value: version.p50Ms },
        goal: { on: "value", op: "≤", limit: 150 },
        note: `p95 ${
          search.p95Ms.toFixed(0)
        } ms; ${specs.length} servers, ${inProcess.toolCount} tools cached`,
      }));
    }
  } finally {
    removeHome(home);
  }
  return result;
}
