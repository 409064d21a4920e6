/**
 * Section "gvisor" (issue 26): the gVisor tier against runc, in the same run, on podman. The two tiers take
 * turns sample by sample (CODEMODE_ISOLATION=gvisor, and the default: runc), so load drifts hit both:
 * a hardened bare `podman run --rm … python3 -c pass`, the cold first answer of a fresh `serve` (spawn to
 * the answer of `1+1`, detection cached), warm `print(1)` p50/p95, 100 proxied tool calls under
 * `asyncio.gather`, and a pandas group-by over 1M rows. Ratios are gVisor / runc.
 * @module
 */
import { autoRuntime, defaults as podmanDefaults } from "../plugins/runtime/podman.ts";
import { buildRunArgs, runConfigFor } from "../plugins/runtime/oci_base.ts";
import { findRunsc } from "../plugins/runtime/gvisor.ts";
import { seccompProfilePath } from "../plugins/runtime/seccomp.ts";
import { coldStart, emptyHome } from "./bench_first_answer.ts";
import {
  exec,
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  row,
  type SectionResult,
  type Served,
  sourceCommand,
  startServe,
  timeEach,
  works,
} from "./bench_harness.ts";

/** Counts of the section. */
export const counts = { bare: 10, cold: 5, warm: 200, warmup: 5, gathered: 10, pandas: 5 };

const LIMITS = { memory: "512m", pids: 128 };
type Tier = "gvisor" | "runc";
const ENV: Record<Tier, Record<string, string>> = {
  gvisor: { CODEMODE_RUNTIME: "podman", CODEMODE_ISOLATION: "gvisor" },
  runc: { CODEMODE_RUNTIME: "podman" },
};

const GATHER = `import asyncio
r = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(100)])
len(r)`;
const PANDAS_SETUP = `import numpy as np, pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame({"key": rng.integers(0, 1000, 1_000_000), "value": rng.random(1_000_000)})
len(df)`;
const PANDAS = `df.groupby("key")["value"].agg(["sum", "mean", "count"]).shape`;

/** Milliseconds of one hardened `podman run --rm IMAGE python3 -c pass` under `tier`, the plugin's flags. */
async function bareRun(tier: Tier, i: number, runsc: string): Promise<number> {
  const gvisor = tier === "gvisor" ? { runtime: runsc, channel: false } : undefined;
  const args = buildRunArgs(
    {
      name: `codemode-bench-${tier}-${process.pid}-${i}`,
      image: IMAGE,
      command: ["python3", "-c", "pass"],
      limits: LIMITS,
      labels: { "codemode.bench": "true" },
    },
    {
      ...runConfigFor(
        "podman",
        { ...podmanDefaults, runtime: autoRuntime(), ...(gvisor ? { isolation: "gvisor" as const } : {}) },
        LIMITS,
        true,
        await seccompProfilePath("codemode", undefined, { gvisor: Boolean(gvisor) }),
        gvisor,
      ),
      channel: false,
    },
  );
  const start = performance.now();
  const r = await exec("podman", args);
  if (r.code !== 0) throw new Error(`Bare podman run (${tier}) failed: ${r.stderr.trim()}`);
  return performance.now() - start;
}

/**
 * Milliseconds of each of `n` runs of `code` in each tier's serve after `warmup` ones, the tiers taking
 * turns run by run, so load that comes and goes weighs on both alike.
 */
async function runTimes(
  served: Record<Tier, Served>,
  code: string,
  n: number,
  warmup: number,
): Promise<Record<Tier, number[]>> {
  const times: Record<Tier, number[]> = { runc: [], gvisor: [] };
  for (let i = 0; i < warmup + n; i++) {
    for (const tier of ["runc", "gvisor"] as const) {
      const [ms] = await timeEach(1, 0, () => served[tier].run(code));
      if (i >= warmup) times[tier].push(ms);
    }
  }
  return times;
}

const both = async <T>(fn: (tier: Tier) => Promise<T>): Promise<Record<Tier, T>> => {
  const runc = await fn("runc");
  const gvisor = await fn("gvisor");
  return { runc, gvisor };
};

/** Runs the gvisor section. */
export async function benchGvisor(): Promise<SectionResult> {
  const result: SectionResult = { name: "gvisor", rows: [], notes: [] };
  const runsc = findRunsc();
  if (runsc.problem) return { ...result, skipped: `${runsc.problem.message} (${runsc.problem.fix})` };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    return { ...result, skipped: `podman or the image ${IMAGE} is missing` };
  }
  const version = (await exec(runsc.path, ["--version"])).stdout.split("\n")[0];
  result.notes.push(`${version} at ${runsc.path}, platform ptrace; podman with runc as the baseline`);
  const add = (metric: string, unit: string, values: Record<Tier, number>, baseline: string, note?: string) =>
    result.rows.push(row({
      section: "gvisor",
      metric,
      value: values.gvisor,
      unit,
      baseline: { label: `${baseline}, runc`, value: values.runc },
      ...(note ? { note } : {}),
    }));
  const homes: string[] = [];
  try {
    // Bare container starts, alternating.
    await bareRun("runc", 0, runsc.path);
    await bareRun("gvisor", 0, runsc.path);
    const bare: Record<Tier, number[]> = { runc: [], gvisor: [] };
    for (let i = 1; i <= counts.bare; i++) {
      bare.runc.push(await bareRun("runc", i, runsc.path));
      bare.gvisor.push(await bareRun("gvisor", i, runsc.path));
    }
    add(
      `hardened \`podman run --rm … python3 -c pass\`, median of ${counts.bare}`,
      "ms",
      { runc: percentile(bare.runc, 0.5), gvisor: percentile(bare.gvisor, 0.5) },
      "the same",
    );

    // Cold first answer: spawn serve, initialize, run `1+1`; the state dir holds each tier's verdict.
    const warmHome: Record<Tier, string> = { runc: emptyHome(), gvisor: emptyHome() };
    homes.push(warmHome.runc, warmHome.gvisor);
    const cold: Record<Tier, number[]> = { runc: [], gvisor: [] };
    for (let i = 0; i <= counts.cold; i++) {
      for (const tier of ["runc", "gvisor"] as const) {
        const { answerMs } = await coldStart(sourceCommand(), warmHome[tier], ENV[tier]);
        if (i > 0) cold[tier].push(answerMs); // the first one detects and caches the verdict
      }
    }
    add(
      `cold first answer: spawn \`serve\` → \`1+1\` answered (detection cached), median of ${counts.cold}`,
      "ms",
      { runc: percentile(cold.runc, 0.5), gvisor: percentile(cold.gvisor, 0.5) },
      "the same",
      `gVisor ${cold.gvisor.map((v) => v.toFixed(0)).join(", ")}; runc ${
        cold.runc.map((v) => v.toFixed(0)).join(", ")
      }`,
    );

    // Warm figures through one serve per tier.
    const served = await both(async (tier) => {
      const home = fakeHome();
      homes.push(home);
      const s = await startServe({ home, env: ENV[tier] });
      await s.runtimeSelected(120_000);
      await s.run("1");
      return s;
    });
    try {
      const warm = await runTimes(served, "print(1)", counts.warm, counts.warmup);
      add(
        `warm \`print(1)\`, p50 of ${counts.warm}`,
        "ms",
        { runc: percentile(warm.runc, 0.5), gvisor: percentile(warm.gvisor, 0.5) },
        "the same",
      );
      add(
        `warm \`print(1)\`, p95 of ${counts.warm}`,
        "ms",
        { runc: percentile(warm.runc, 0.95), gvisor: percentile(warm.gvisor, 0.95) },
        "the same",
      );
      const gathered = await runTimes(served, GATHER, counts.gathered, 2);
      add(
        `100 proxied \`echo\` calls under \`asyncio.gather\`, one run, median of ${counts.gathered}`,
        "ms",
        { runc: percentile(gathered.runc, 0.5), gvisor: percentile(gathered.gvisor, 0.5) },
        "the same",
      );
      await both((tier) => served[tier].run(PANDAS_SETUP));
      const pandas = await runTimes(served, PANDAS, counts.pandas, 1);
      add(
        `pandas group-by (sum, mean, count) over 1M rows, one run, median of ${counts.pandas}`,
        "ms",
        { runc: percentile(pandas.runc, 0.5), gvisor: percentile(pandas.gvisor, 0.5) },
        "the same",
      );
    } finally {
      await Promise.all([served.runc.close(), served.gvisor.close()]);
    }
  } finally {
    for (const home of homes) removeHome(home);
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
  }
  return result;
}
