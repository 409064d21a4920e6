/**
 * Section "startup" (issue 12): how fast `dist/codemode --version` and `--help` answer, against a Bun
 * hello world compiled in the same run with compile.sh's flags (the floor any Bun binary pays), timed by
 * hyperfine as whole processes. Target: within 1.5x of the hello world.
 * @module
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BINARY, exec, ROOT, row, type SectionResult, sourceCommand, works } from "./bench_harness.ts";

const BUN = join(ROOT, "node_modules/.bin/bun");

/** Runs per command (after warm-ups). */
export const counts = { runs: 40, warmup: 5 };

/** hyperfine's figures for one command, in milliseconds. */
export interface Timing {
  command: string;
  medianMs: number;
  /** Mean user plus system CPU time. */
  cpuMs: number;
}

/** Times `commands` with hyperfine, interleaved in one run; milliseconds. */
export async function hyperfine(commands: string[]): Promise<Timing[]> {
  const dir = mkdtempSync(join(tmpdir(), "codemode-bench-startup-"));
  try {
    const out = join(dir, "times.json");
    const args = ["-N", "--style", "none", "--warmup", String(counts.warmup), "--runs", String(counts.runs)];
    const result = await exec("hyperfine", [...args, "--export-json", out, ...commands], 600_000);
    if (result.code !== 0) throw new Error(`hyperfine failed: ${result.stderr.slice(-500)}`);
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      results: { command: string; median: number; user: number; system: number }[];
    };
    return report.results.map((r) => ({
      command: r.command,
      medianMs: r.median * 1000,
      cpuMs: (r.user + r.system) * 1000,
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Compiles a `console.log` with the flags scripts/compile.sh uses; returns its path. */
async function helloWorld(dir: string): Promise<string> {
  const source = join(dir, "hello.ts");
  const binary = join(dir, "hello");
  writeFileSync(source, 'console.log("hello");\n');
  const flags = ["--compile", "--bytecode", "--format=esm", "--minify-syntax", "--minify-whitespace"];
  const built = await exec(BUN, ["build", source, ...flags, "--target=bun", "--outfile", binary], 300_000);
  if (built.code !== 0) throw new Error(`bun build failed: ${built.stderr.slice(-500)}`);
  return binary;
}

/** Runs the startup section. */
export async function benchStartup(): Promise<SectionResult> {
  const result: SectionResult = { name: "startup", rows: [], notes: [] };
  if (!existsSync(BINARY)) {
    result.skipped = `${BINARY} is missing: build it with deno task compile`;
    return result;
  }
  if (!(await works("hyperfine", ["--version"]))) {
    result.skipped = "hyperfine is missing: apt-get install hyperfine (scripts/setup.sh installs it)";
    return result;
  }
  const dir = mkdtempSync(join(tmpdir(), "codemode-bench-hello-"));
  try {
    const hello = await helloWorld(dir);
    const source = sourceCommand().join(" ");
    const [base, version, help, fromSource] = await hyperfine([
      hello,
      `${BINARY} --version`,
      `${BINARY} --help`,
      `${source} --version`,
    ]);
    const baseline = { label: "Bun-compiled console.log, same flags (median)", value: base.medianMs };
    for (const [label, t] of [["--version", version], ["--help", help]] as const) {
      result.rows.push(row({
        section: "startup",
        metric: `dist/codemode ${label}, median of ${counts.runs}`,
        value: t.medianMs,
        unit: "ms",
        baseline,
        goal: { on: "ratio", op: "≤", limit: 1.5 },
        note: `CPU (user + system) ${t.cpuMs.toFixed(1)} ms against ${base.cpuMs.toFixed(1)} ms`,
      }));
    }
    result.rows.push(row({
      section: "startup",
      metric: `from source, deno run -A cli.ts --version, median of ${counts.runs}`,
      value: fromSource.medianMs,
      unit: "ms",
      baseline,
      note: `CPU ${fromSource.cpuMs.toFixed(1)} ms`,
    }));
    result.notes.push(
      `hyperfine -N, ${counts.warmup} warm-ups and ${counts.runs} runs per command, the four commands in ` +
        "one invocation; the hello world is compiled in the same run with scripts/compile.sh's flags " +
        "(code splitting aside: it is one file)",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}
