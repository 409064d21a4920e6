/**
 * Section "firstanswer" (issue 19): whole-process cold start to the first answer. Each sample spawns
 * `codemode serve`, initializes an SDK client and calls run_python `1+1`; the figure is the median of
 * several such cold starts, from spawning the process to the answer. Measured for podman with a cached
 * detection (against a hardened `podman run --rm <image> python3 -c pass` in the same run), and for
 * Pyodide with a warm state directory and with a fresh HOME; from source and from the compiled binary.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bareRun } from "./bench_serve.ts";
import {
  BINARY,
  IMAGE,
  percentile,
  removeLeftovers,
  row,
  type SectionResult,
  sourceCommand,
  trackServe,
  works,
} from "./bench_harness.ts";

/** Counts of the section. */
export const counts = { starts: 5, bare: 5 };

/** One cold start: milliseconds to the initialize response and to the first answer. */
export interface ColdStart {
  initializeMs: number;
  answerMs: number;
}

/**
 * Spawns `command serve` in `home` (state in `<home>/state` unless `env` says otherwise), initializes,
 * calls run_python `1+1` and closes; throws unless the answer is 2.
 */
export async function coldStart(
  command: string[],
  home: string,
  env: Record<string, string>,
): Promise<ColdStart> {
  const started = performance.now();
  const transport = new StdioClientTransport({
    command: command[0],
    args: [...command.slice(1), "serve"],
    cwd: home,
    env: { PATH: process.env.PATH ?? "", HOME: home, CODEMODE_STATE_DIR: join(home, "state"), ...env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  const client = new Client({ name: "codemode-bench-first-answer", version: "1" });
  try {
    await client.connect(transport);
    if (transport.pid) trackServe(transport.pid);
    const initializeMs = performance.now() - started;
    const result = await client.callTool({ name: "run_python", arguments: { code: "1+1" } }, {
      timeout: 300_000,
    });
    const answerMs = performance.now() - started;
    const text = (result.content as { text: string }[])[0]?.text?.trim();
    if (result.isError || text !== "2") {
      throw new Error(`The first answer was "${text}": ${stderr.slice(-1000)}`);
    }
    return { initializeMs, answerMs };
  } finally {
    await client.close();
  }
}

/** A throwaway HOME with no MCP servers configured. */
export function emptyHome(): string {
  return mkdtempSync(join(tmpdir(), "codemode-bench-first-"));
}

/** `n` cold starts in `home` (after `warmup` unmeasured ones); median and all answer times. */
async function medianOf(
  command: string[],
  home: () => string,
  env: Record<string, string>,
  n: number,
  warmup: number,
): Promise<{ median: number; all: number[] }> {
  const all: number[] = [];
  for (let i = 0; i < warmup + n; i++) {
    const { answerMs } = await coldStart(command, home(), env);
    if (i >= warmup) all.push(answerMs);
  }
  return { median: percentile(all, 0.5), all };
}

const list = (values: number[]) => values.map((v) => v.toFixed(0)).join(", ");

/** Runs the firstanswer section. */
export async function benchFirstAnswer(): Promise<SectionResult> {
  const result: SectionResult = { name: "firstanswer", rows: [], notes: [] };
  const builds: [string, string[]][] = [["from source", sourceCommand()]];
  if (existsSync(BINARY)) builds.push(["dist/codemode", [BINARY]]);
  else result.notes.push(`${BINARY} is missing: no binary figures (build it with deno task compile)`);
  const homes: string[] = [];
  const home = () => {
    const dir = emptyHome();
    homes.push(dir);
    return dir;
  };
  try {
    if (await works("podman", ["image", "exists", IMAGE])) {
      await bareRun(0);
      const bare: number[] = [];
      for (let i = 1; i <= counts.bare; i++) bare.push(await bareRun(i));
      const bareMs = percentile(bare, 0.5);
      const baseline = {
        label: `hardened podman run --rm … python3 -c pass (median of ${counts.bare})`,
        value: bareMs,
      };
      for (const [label, command] of builds) {
        const warm = home();
        const env = { CODEMODE_RUNTIME: "podman" };
        // The first start detects and caches; the measured ones start from the cached verdict.
        const cached = await medianOf(command, () => warm, env, counts.starts, 1);
        result.rows.push(row({
          section: "firstanswer",
          metric:
            `podman, detection cached, ${label}: spawn → initialize → 1+1 answered (median of ${counts.starts})`,
          value: cached.median,
          unit: "ms",
          baseline,
          goal: { on: "ratio", op: "≤", limit: 2 },
          note: `all: ${list(cached.all)} ms; prewarm on (default)`,
        }));
        const fresh = await medianOf(
          command,
          () => {
            rmSync(join(warm, "state", "runtime-detection.json"), { force: true });
            return warm;
          },
          env,
          counts.starts,
          0,
        );
        result.rows.push(row({
          section: "firstanswer",
          metric: `podman, detection not cached, ${label} (median of ${counts.starts})`,
          value: fresh.median,
          unit: "ms",
          baseline,
          note: `all: ${list(fresh.all)} ms; podman info, image check and probe container on every start`,
        }));
      }
    } else {
      result.notes.push(`podman or "${IMAGE}" is missing: no podman figures`);
    }
    for (const [label, command] of builds) {
      const env = { CODEMODE_RUNTIME: "pyodide" };
      const warm = home();
      const cached = await medianOf(command, () => warm, env, counts.starts, 1);
      result.rows.push(row({
        section: "firstanswer",
        metric: `pyodide, state warm, ${label} (median of ${counts.starts})`,
        value: cached.median,
        unit: "ms",
        goal: { on: "value", op: "≤", limit: 1000 },
        note: `all: ${list(cached.all)} ms`,
      }));
      const fresh = await medianOf(command, home, env, counts.starts, 0);
      result.rows.push(row({
        section: "firstanswer",
        metric: `pyodide, fresh HOME, ${label} (median of ${counts.starts})`,
        value: fresh.median,
        unit: "ms",
        baseline: { label: "the same with the state warm", value: cached.median },
        goal: { on: "value", op: "≤", limit: 3000 },
        note: `all: ${list(fresh.all)} ms; ${
          label === "from source"
            ? "copies the snapshot made after npm install"
            : "unpacks Deno, Pyodide and the snapshot"
        }`,
      }));
    }
    result.notes.push(
      "Each sample is a new serve process: from spawning it to the answer of its first run_python `1+1`, " +
        "through the SDK client (initialize included). No MCP servers are configured.",
    );
  } finally {
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    for (const dir of homes) rmSync(dir, { recursive: true, force: true });
  }
  return result;
}
