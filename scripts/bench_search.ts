/**
 * Search benchmarks: in-process query latency over the reference servers' tools plus the synthetic catalog,
 * and a hook that times a whole CLI process against a pre-populated cache.
 * Run: `deno run -A scripts/bench_search.ts` (prints the in-process numbers as JSON).
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import type { ServerSpec } from "../core/contracts/discovery.ts";
import { ToolCatalog } from "../core/catalog/catalog.ts";
import { toolDoc } from "../core/catalog/docs.ts";
import { ToolIndex } from "../core/catalog/index.ts";
import { syntheticCatalog } from "./synthetic_catalog.ts";

/** In-process search timings. */
export interface SearchBench {
  /** Median time of one query, cold (no per-word cache), in milliseconds. */
  inProcessP50Ms: number;
  inProcessP95Ms: number;
  /** Tools in the index. */
  toolCount: number;
  /** Time to build the index, in milliseconds (not part of the query times). */
  buildMs: number;
  /** Distinct queries timed. */
  queryCount: number;
}

/** Options of {@link benchSearch}. */
export interface BenchSearchOptions {
  /** Synthetic tools added to the reference servers' 36 (default 1,200). */
  syntheticCount?: number;
  /** Timed passes over the query set, after one warm-up pass (default 20). */
  passes?: number;
}

const catalogs = new URL("../tests/testdata/catalogs/", import.meta.url);

/** Every server of the benchmark: the three reference servers' real tool lists and the synthetic ones. */
export function benchServers(syntheticCount = 1200): { server: string; tools: Tool[] }[] {
  const real = ["everything", "filesystem", "memory"].map((name) =>
    JSON.parse(readFileSync(new URL(`${name}.json`, catalogs), "utf8")) as { server: string; tools: Tool[] }
  );
  return [...real, ...syntheticCatalog(syntheticCount)];
}

/** The labelled query strings (tests/testdata/catalogs/queries.json): realistic, with typos and camelCase. */
export function benchQueries(): string[] {
  const queries = JSON.parse(readFileSync(new URL("queries.json", catalogs), "utf8")) as { q: string }[];
  return queries.map((q) => q.q);
}

/** Times in-process queries over 1,200+ tools. The per-word cache is off, so every query pays in full. */
export function benchSearch(options: BenchSearchOptions = {}): SearchBench {
  const docs = benchServers(options.syntheticCount).flatMap(({ server, tools }) =>
    tools.map((t) => toolDoc(server, t))
  );
  const buildStart = performance.now();
  const index = new ToolIndex(docs, { cacheSize: 0 });
  const buildMs = performance.now() - buildStart;
  const queries = benchQueries();
  for (const q of queries) index.search(q, { limit: 10 });
  const times: number[] = [];
  for (let pass = 0; pass < (options.passes ?? 20); pass++) {
    for (const q of queries) {
      const start = performance.now();
      index.search(q, { limit: 10 });
      times.push(performance.now() - start);
    }
  }
  return {
    inProcessP50Ms: round(percentile(times, 0.5)),
    inProcessP95Ms: round(percentile(times, 0.95)),
    toolCount: docs.length,
    buildMs: round(buildMs),
    queryCount: queries.length,
  };
}

/** Fake launch specs for the benchmark servers, so a catalog can be cached for them. */
export function benchSpecs(servers = benchServers()): ServerSpec[] {
  return servers.map(({ server }) => ({
    name: server,
    transport: "stdio",
    command: "codemode-bench-server",
    args: [server],
    source: { plugin: "bench", file: "bench", key: `mcpServers.${server}` },
  }));
}

/**
 * Fills `<stateDir>/tool-docs/` with the benchmark servers' docs, as a first `codemode search` would, and
 * returns their specs; write them into a client config (command `codemode-bench-server`, args `[name]`) so
 * a CLI process finds them all cached.
 */
export async function populateCache(stateDir: string, syntheticCount = 1200): Promise<ServerSpec[]> {
  const servers = benchServers(syntheticCount);
  const tools = new Map(servers.map((s) => [s.server, s.tools]));
  const specs = benchSpecs(servers);
  const catalog = new ToolCatalog(specs, (spec) => Promise.resolve(tools.get(spec.name) ?? []), { stateDir });
  await catalog.ready();
  return specs;
}

/** Whole-process timings of a command. */
export interface ProcessBench {
  p50Ms: number;
  p95Ms: number;
  runs: number;
}

/** Options of {@link benchProcess}. */
export interface BenchProcessOptions {
  /** Timed runs, after one warm-up run (default 10). */
  runs?: number;
  env?: Record<string, string>;
  cwd?: string;
}

/**
 * Runs `command` (e.g. `["./dist/codemode", "search", "read file", "--json"]`) repeatedly and times each
 * whole process, start to exit. Point it at a populated cache (see {@link populateCache}) through `env`,
 * e.g. `{ CODEMODE_STATE_DIR: dir }`. A run that exits non-zero fails the benchmark with its stderr.
 */
export async function benchProcess(
  command: string[],
  options: BenchProcessOptions = {},
): Promise<ProcessBench> {
  const runs = options.runs ?? 10;
  const times: number[] = [];
  for (let i = 0; i <= runs; i++) {
    const elapsed = await timeProcess(command, options);
    if (i > 0) times.push(elapsed);
  }
  return { p50Ms: round(percentile(times, 0.5)), p95Ms: round(percentile(times, 0.95)), runs };
}

function timeProcess(command: string[], options: BenchProcessOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(command[0], command.slice(1), {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => stderr = (stderr + chunk).slice(-2000));
    child.on("error", reject);
    child.on("close", (code) => {
      const elapsed = performance.now() - start;
      if (code === 0) resolve(elapsed);
      else reject(new Error(`Command "${command.join(" ")}" exited with ${code}: ${stderr.trim()}`));
    });
  });
}

function percentile(sorted: number[], p: number): number {
  const values = [...sorted].sort((a, b) => a - b);
  return values[Math.min(values.length - 1, Math.floor(values.length * p))] ?? 0;
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

if (import.meta.main) {
  console.log(JSON.stringify(benchSearch(), null, 2));
}
