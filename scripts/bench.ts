/**
 * `deno task bench`: measures codemode against baselines taken in the same run and prints one table per
 * section (Markdown, so it pastes into BENCHMARKS.md). Benchmarks measure; they never assert.
 *
 *   deno run -A scripts/bench.ts [--only serve|proxy|search|binary|pyodide] [--json]
 * @module
 */
import { arch, cpus, loadavg, release } from "node:os";
import { ownContainers, type SectionResult } from "./bench_harness.ts";
import { benchServe } from "./bench_serve.ts";
import { benchProxy } from "./bench_proxy.ts";
import { benchSearchSection } from "./bench_search_cli.ts";
import { benchBinary } from "./bench_binary.ts";
import { benchPyodide } from "./bench_pyodide.ts";

/** The sections, in the order they run. */
export const SECTIONS: Record<string, () => Promise<SectionResult>> = {
  serve: benchServe,
  proxy: benchProxy,
  search: benchSearchSection,
  binary: benchBinary,
  pyodide: benchPyodide,
};

function parseArgs(argv: string[]): { only?: string; json: boolean } {
  const json = argv.includes("--json");
  const at = argv.indexOf("--only");
  const only = at >= 0 ? argv[at + 1] : undefined;
  const unknown = argv.filter((a, i) => a !== "--json" && a !== "--only" && !(at >= 0 && i === at + 1));
  if (unknown.length || (at >= 0 && !only)) {
    console.error("Usage: deno task bench [--only <section>] [--json]");
    process.exit(2);
  }
  if (only && !SECTIONS[only]) {
    console.error(`Unknown section "${only}"; choose one of ${Object.keys(SECTIONS).join(", ")}`);
    process.exit(2);
  }
  return { only, json };
}

function cell(n: number | undefined, unit = ""): string {
  if (n === undefined) return "-";
  const text = Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);
  return unit ? `${text} ${unit}` : text;
}

/** One section as a Markdown table. */
export function renderSection(section: SectionResult): string {
  const lines = [`## ${section.name}`, ""];
  if (section.skipped) return [...lines, `skipped: ${section.skipped}`, ""].join("\n");
  lines.push(
    "| Metric | Measured | Baseline | Ratio | Target | Note |",
    "| --- | --- | --- | --- | --- | --- |",
  );
  for (const r of section.rows) {
    const baseline = r.baseline ? `${cell(r.baseline.value, r.unit)} (${r.baseline.label})` : "-";
    const ratio = r.ratio === undefined ? "-" : `${r.ratio}x`;
    lines.push(
      `| ${r.metric} | ${cell(r.value, r.unit)} | ${baseline} | ${ratio} | ${r.target ?? "-"} | ${
        r.note ?? ""
      } |`,
    );
  }
  for (const note of section.notes) lines.push("", `- ${note}`);
  return [...lines, ""].join("\n");
}

async function main(): Promise<void> {
  const { only, json } = parseArgs(process.argv.slice(2));
  const started = performance.now();
  const machine = `${cpus().length} cores, ${
    cpus()[0]?.model ?? "unknown cpu"
  }, ${arch()}, linux ${release()}`;
  if (!json) console.log(`# codemode benchmarks, ${new Date().toISOString()}\n\n${machine}\n`);
  const results: SectionResult[] = [];
  for (const [name, run] of Object.entries(SECTIONS)) {
    if (only && name !== only) continue;
    const sectionStart = performance.now();
    const loadBefore = loadavg()[0];
    let result: SectionResult;
    try {
      result = await run();
    } catch (error) {
      result = { name, rows: [], notes: [], skipped: `failed: ${(error as Error).message}` };
    }
    const seconds = (performance.now() - sectionStart) / 1000;
    // Other work on the machine skews every figure; the load average says how busy it was.
    result.notes.push(
      `section took ${seconds.toFixed(1)} s; 1-min load average ${loadBefore.toFixed(2)} before, ${
        loadavg()[0].toFixed(2)
      } after`,
    );
    results.push(result);
    if (!json) console.log(renderSection(result));
  }
  const left = await ownContainers();
  const total = (performance.now() - started) / 1000;
  if (json) {
    console.log(JSON.stringify(
      {
        date: new Date().toISOString(),
        machine,
        seconds: Math.round(total),
        leftoverContainers: left,
        sections: results,
      },
      null,
      2,
    ));
  } else {
    console.log(
      `Total ${total.toFixed(1)} s; containers left by this run: ${left.length ? left.join(", ") : "none"}`,
    );
  }
  // Upstream servers' and clients' handles must not keep a finished benchmark alive.
  process.exit(0);
}

if (import.meta.main) await main();
