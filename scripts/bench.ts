/**
 * `deno task bench`: measures codemode against baselines taken in the same run and prints one table per
 * section (Markdown, so it pastes into BENCHMARKS.md). Benchmarks measure and report; they never assert.
 *
 *   deno run -A scripts/bench.ts [--only <section>] [--json]     (the sections: SECTIONS below)
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { arch, cpus, loadavg, release, totalmem } from "node:os";
import { autoRuntime } from "../plugins/runtime/podman.ts";
import { DENO, exec, ownContainers, type Row, type SectionResult } from "./bench_harness.ts";
import { benchServe } from "./bench_serve.ts";
import { benchProxy } from "./bench_proxy.ts";
import { benchHotPath } from "./bench_hot_path.ts";
import { benchPeers } from "./bench_peers.ts";
import { benchSearchSection } from "./bench_search_cli.ts";
import { benchBinary } from "./bench_binary.ts";
import { benchPyodide } from "./bench_pyodide.ts";
import { benchLoad } from "./bench_load.ts";
import { benchStartup } from "./bench_startup.ts";
import { benchDisplay } from "./bench_display.ts";
import { benchImage } from "./bench_image.ts";
import { benchArtifacts } from "./bench_artifacts.ts";
import { benchSkills } from "./bench_skills.ts";
import { benchApprovals } from "./bench_approvals.ts";
import { benchOAuth } from "./bench_oauth.ts";
import { benchStandalone } from "./bench_standalone.ts";
import { benchFirstAnswer } from "./bench_first_answer.ts";
import { benchDashboard } from "./bench_dashboard.ts";
import { benchInstall } from "./bench_install.ts";
import { benchJobs } from "./bench_jobs.ts";
import { benchRegistry } from "./bench_registry.ts";
import { benchTracing } from "./bench_tracing.ts";
import { benchHostile } from "./bench_hostile.ts";
import { benchGvisor } from "./bench_gvisor.ts";
import { benchFleet } from "./bench_fleet.ts";
import { benchPrecheck } from "./bench_precheck.ts";

/** The sections, in the order they run. */
export const SECTIONS: Record<string, () => Promise<SectionResult>> = {
  serve: benchServe,
  proxy: benchProxy,
  hotpath: benchHotPath,
  peers: benchPeers,
  search: benchSearchSection,
  binary: benchBinary,
  pyodide: benchPyodide,
  load: benchLoad,
  startup: benchStartup,
  display: benchDisplay,
  image: benchImage,
  artifacts: benchArtifacts,
  skills: benchSkills,
  approvals: benchApprovals,
  oauth: benchOAuth,
  standalone: benchStandalone,
  firstanswer: benchFirstAnswer,
  dashboard: benchDashboard,
  install: benchInstall,
  jobs: benchJobs,
  registry: benchRegistry,
  tracing: benchTracing,
  hostile: benchHostile,
  gvisor: benchGvisor,
  fleet: benchFleet,
  precheck: benchPrecheck,
};

/** Sections that run only when asked for with --only: building two images from scratch takes many minutes. */
const ON_REQUEST = new Set(["image"]);

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

/** The machine and tool versions, for the report header. */
async function machine(): Promise<string> {
  const firstLine = async (command: string, args: string[]) =>
    (await exec(command, args, 15_000)).stdout.split("\n")[0].trim() || "missing";
  const debian = existsSync("/etc/debian_version") ? readFileSync("/etc/debian_version", "utf8").trim() : "?";
  const cpu = cpus()[0]?.model ?? "unknown cpu";
  const gib = Math.round(totalmem() / 2 ** 30);
  const podman = await firstLine("podman", ["--version"]);
  const deno = await firstLine(DENO, ["--version"]);
  return `${cpus().length} cores (${cpu}), ${gib} GiB, ${arch()}, Debian ${debian}, linux ${release()}; ` +
    `${podman} (OCI runtime ${autoRuntime() ?? "engine default"}); ${deno}`;
}

function cell(n: number | undefined, unit = ""): string {
  if (n === undefined) return "-";
  const text = Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);
  return unit ? `${text} ${unit}` : text;
}

function met(r: Row): string {
  return r.met === undefined ? "-" : r.met ? "yes" : "no";
}

/** One section as a Markdown table. */
export function renderSection(section: SectionResult): string {
  const lines = [`## ${section.name}`, ""];
  if (section.skipped) return [...lines, `skipped: ${section.skipped}`, ""].join("\n");
  lines.push(
    "| Metric | Measured | Baseline (same run) | Ratio | Target | Met | Note |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const r of section.rows) {
    const baseline = r.baseline ? `${cell(r.baseline.value, r.unit)} (${r.baseline.label})` : "-";
    const ratio = r.ratio === undefined ? "-" : `${r.ratio}x`;
    const cells = [r.metric, cell(r.value, r.unit), baseline, ratio, r.target ?? "-", met(r), r.note ?? ""];
    lines.push(`| ${cells.join(" | ")} |`);
  }
  if (section.notes.length) lines.push("");
  for (const note of section.notes) lines.push(`- ${note}`);
  return [...lines, ""].join("\n");
}

async function main(): Promise<void> {
  const { only, json } = parseArgs(process.argv.slice(2));
  const started = performance.now();
  const date = new Date().toISOString();
  const host = await machine();
  const command = `deno task bench${only ? ` --only ${only}` : ""}${json ? " --json" : ""}`;
  if (!json) console.log(`# codemode benchmarks, ${date}\n\n${host}\n\n\`${command}\`\n`);
  const results: SectionResult[] = [];
  for (const [name, run] of Object.entries(SECTIONS)) {
    if (only ? name !== only : ON_REQUEST.has(name)) continue;
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
    const load = `1-min load average ${loadBefore.toFixed(2)} before, ${loadavg()[0].toFixed(2)} after`;
    result.notes.push(`section took ${seconds.toFixed(1)} s; ${load}`);
    results.push(result);
    if (!json) console.log(renderSection(result));
  }
  const left = await ownContainers();
  const total = (performance.now() - started) / 1000;
  if (json) {
    const report = { date, machine: host, command, seconds: Math.round(total), leftoverContainers: left };
    console.log(JSON.stringify({ ...report, sections: results }, null, 2));
  } else {
    const leftText = left.length ? left.join(", ") : "none";
    console.log(`Total ${total.toFixed(1)} s; containers left by this run: ${leftText}`);
  }
  // Upstream servers' and clients' handles must not keep a finished benchmark alive.
  process.exit(0);
}

if (import.meta.main) await main();
