/**
 * Section "standalone" (issue 18): the compiled binary with nothing but coreutils on PATH (its embedded
 * Deno runs the Pyodide sandbox): its size against the same binary without the runtime embed, the
 * first-use unpack against copying the same bytes, and its cold first call and warm round trip against
 * codemode from source (node_modules' Deno and Pyodide).
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { PYODIDE_FILES } from "../plugins/runtime/_pyodide_files.ts";
import type { EmbedManifest } from "../plugins/runtime/_pyodide_embedded.ts";
import { makeCoreutilsDir } from "../tests/e2e/_coreutils.ts";
import { coldStart, emptyHome } from "./bench_first_answer.ts";
import {
  BINARY,
  exec,
  percentile,
  ROOT,
  row,
  type SectionResult,
  sourceCommand,
  startServe,
  timeEach,
} from "./bench_harness.ts";

/** Counts of the section. */
export const counts = { unpacks: 3, starts: 5, warm: 100, warmup: 5 };

const EMBED = join(ROOT, "dist", "embed", `${process.platform}-${process.arch}`);

const mib = (bytes: number) => bytes / 2 ** 20;

/** Runs the standalone section. */
export async function benchStandalone(): Promise<SectionResult> {
  const result: SectionResult = { name: "standalone", rows: [], notes: [] };
  if (!existsSync(BINARY) || !existsSync(join(EMBED, "manifest.json"))) {
    result.skipped = `${BINARY} or dist/embed is missing: build it with deno task compile`;
    return result;
  }
  const manifest: EmbedManifest = JSON.parse(readFileSync(join(EMBED, "manifest.json"), "utf8"));
  const carried = ["deno.zst", "host.mjs", "snapshot.bin.zst", ...PYODIDE_FILES.map((f) => `${f}.zst`)]
    .reduce((sum, name) => sum + statSync(join(EMBED, name)).size, 0);
  const rawPyodide = PYODIDE_FILES.reduce(
    (sum, f) => sum + statSync(join(ROOT, "node_modules", "pyodide", f)).size,
    0,
  );
  const size = statSync(BINARY).size;
  result.rows.push(row({
    section: "standalone",
    metric: "dist/codemode size",
    value: mib(size),
    unit: "MiB",
    baseline: {
      label: "the same binary without the runtime embed, carrying the six raw Pyodide files as before",
      value: mib(size - carried + rawPyodide),
    },
    note: `embeds ${mib(carried).toFixed(1)} MiB: Deno ${manifest.deno} (zstd) ` +
      `${mib(statSync(join(EMBED, "deno.zst")).size).toFixed(1)} MiB, snapshot ` +
      `${
        mib(statSync(join(EMBED, "snapshot.bin.zst")).size).toFixed(1)
      } MiB; Bun appends embedded files as they are`,
  }));

  const path = makeCoreutilsDir("codemode-bench-coreutils-");
  const homes: string[] = [path];
  const home = () => {
    const dir = emptyHome();
    homes.push(dir);
    return dir;
  };
  try {
    // First use: a fresh state directory, the log line of the unpack says how long it took.
    const unpacks: number[] = [];
    const copies: number[] = [];
    let unpacked = "";
    for (let i = 0; i < counts.unpacks; i++) {
      const dir = home();
      const ran = spawnSync(BINARY, ["run", "-"], {
        input: "print(1)\n",
        env: { PATH: path, HOME: dir, CODEMODE_STATE_DIR: join(dir, "state"), CODEMODE_LOG_LEVEL: "info" },
        encoding: "utf8",
        timeout: 300_000,
      });
      const ms = /"msg":"unpacked the embedded runtime".*?"ms":(\d+)/.exec(ran.stderr)?.[1];
      if (ran.status !== 0 || !ms) {
        throw new Error(`The binary's first run failed: ${ran.stderr.slice(-1000)}`);
      }
      unpacks.push(Number(ms));
      unpacked = join(dir, "state");
      const copy = join(home(), "copy");
      mkdirSync(copy);
      const started = performance.now();
      await exec("cp", ["-r", join(unpacked, "deno"), join(unpacked, "pyodide"), copy]);
      copies.push(performance.now() - started);
    }
    result.rows.push(row({
      section: "standalone",
      metric:
        `first-use unpack (Deno, Pyodide, snapshot: decompress, hash, write; median of ${counts.unpacks})`,
      value: percentile(unpacks, 0.5),
      unit: "ms",
      baseline: {
        label: "cp -r of the unpacked files (same bytes, no decompression or hashing)",
        value: percentile(copies, 0.5),
      },
      note: `all: ${unpacks.join(", ")} ms`,
    }));

    // Cold first call, whole process, from a warm state directory: the binary alone against source.
    const binaryEnv = { PATH: path };
    const sourceEnv = { CODEMODE_RUNTIME: "pyodide" };
    const warmBinary = home(), warmSource = home();
    const cold = async (command: string[], dir: string, env: Record<string, string>) => {
      const times: number[] = [];
      for (let i = 0; i <= counts.starts; i++) {
        const { answerMs } = await coldStart(command, dir, env);
        if (i > 0) times.push(answerMs);
      }
      return times;
    };
    const binaryCold = await cold([BINARY], warmBinary, binaryEnv);
    const sourceCold = await cold(sourceCommand(), warmSource, sourceEnv);
    result.rows.push(row({
      section: "standalone",
      metric:
        `cold first call, binary alone (PATH: coreutils; spawn → 1+1 answered, median of ${counts.starts})`,
      value: percentile(binaryCold, 0.5),
      unit: "ms",
      baseline: {
        label: "from source, CODEMODE_RUNTIME=pyodide (median)",
        value: percentile(sourceCold, 0.5),
      },
      note: `binary ${binaryCold.map((t) => t.toFixed(0)).join(", ")}; source ${
        sourceCold.map((t) => t.toFixed(0)).join(", ")
      } ms`,
    }));

    const warm = async (command: string[], dir: string, env: Record<string, string>) => {
      const served = await startServe({ home: dir, command, env });
      try {
        return await timeEach(counts.warm, counts.warmup, () => served.run("print(1)"));
      } finally {
        await served.close();
      }
    };
    const binaryWarm = await warm([BINARY], warmBinary, binaryEnv);
    const sourceWarm = await warm(sourceCommand(), warmSource, sourceEnv);
    result.rows.push(row({
      section: "standalone",
      metric: `warm print(1), binary alone, p50 of ${counts.warm}`,
      value: percentile(binaryWarm, 0.5),
      unit: "ms",
      baseline: { label: "from source (p50)", value: percentile(sourceWarm, 0.5) },
      note: `p95 ${percentile(binaryWarm, 0.95).toFixed(2)} ms (source ${
        percentile(sourceWarm, 0.95).toFixed(2)
      } ms)`,
    }));
  } finally {
    for (const dir of homes) rmSync(dir, { recursive: true, force: true });
  }
  return result;
}
