/**
 * Section "binary" (issue 4): the compiled `dist/codemode` against the runtime it embeds and against
 * codemode run from source: size, `--version` start-up, and `serve` start to the initialize response.
 * @module
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { benchProcess } from "./bench_search.ts";
import {
  BINARY,
  DENO,
  fakeHome,
  percentile,
  removeHome,
  removeLeftovers,
  ROOT,
  row,
  type SectionResult,
  sourceCommand,
  startServe,
} from "./bench_harness.ts";

const BUN = join(ROOT, "node_modules/.bin/bun");

/** Counts of the binary section. */
export const counts = { versionRuns: 20, serveStarts: 5 };

/** The runtime `bun build --compile` or `deno compile` put into dist/codemode. */
function embeddedRuntime(): "bun" | "deno" {
  return readFileSync(BINARY).includes("---- Bun! ----") ? "bun" : "deno";
}

/** Median milliseconds from spawning `command serve` to its initialize response. */
async function initializeP50(command: string[], home: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i <= counts.serveStarts; i++) {
    const served = await startServe({ home, command, env: { CODEMODE_RUNTIME: "podman" } });
    if (i > 0) times.push(served.initializeMs);
    await served.close();
  }
  return percentile(times, 0.5);
}

/** Runs the binary section. */
export async function benchBinary(): Promise<SectionResult> {
  const result: SectionResult = { name: "binary", rows: [], notes: [] };
  if (!existsSync(BINARY)) {
    result.skipped = `${BINARY} is missing: build it with deno task compile`;
    return result;
  }
  const mib = (path: string) => statSync(path).size / 2 ** 20;
  const engine = embeddedRuntime();
  result.rows.push(row({
    section: "binary",
    metric: "dist/codemode size",
    value: mib(BINARY),
    unit: "MiB",
    baseline: {
      label: `the ${engine} executable it embeds (node_modules)`,
      value: mib(engine === "bun" ? BUN : DENO),
    },
    note: `compiled with ${engine} (scripts/compile.sh)`,
  }));

  const binaryVersion = await benchProcess([BINARY, "--version"], { runs: counts.versionRuns });
  const sourceVersion = await benchProcess([...sourceCommand(), "--version"], { runs: counts.versionRuns });
  result.rows.push(row({
    section: "binary",
    metric: `dist/codemode --version p50 (${counts.versionRuns} runs)`,
    value: binaryVersion.p50Ms,
    unit: "ms",
    baseline: { label: "deno run -A cli.ts --version (p50)", value: sourceVersion.p50Ms },
    note: `p95 ${binaryVersion.p95Ms.toFixed(1)} ms`,
  }));

  const homes = { none: fakeHome(() => ({})), three: fakeHome() };
  try {
    for (const [label, home] of [["no servers", homes.none], ["3 reference servers", homes.three]] as const) {
      const binary = await initializeP50([BINARY], home);
      const source = await initializeP50(sourceCommand(), home);
      result.rows.push(row({
        section: "binary",
        metric:
          `serve start → initialize response, ${label} configured, dist/codemode (p50 of ${counts.serveStarts})`,
        value: binary,
        unit: "ms",
        baseline: { label: "from source, deno run -A cli.ts serve (p50)", value: source },
      }));
    }
    result.notes.push(
      "serve start is timed from spawning the process to the initialize response, through the SDK client; " +
        "with servers configured, serve starts indexing them (spawning each) at once, on the same 2 cores",
    );
  } finally {
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    for (const home of Object.values(homes)) removeHome(home);
  }
  return result;
}
