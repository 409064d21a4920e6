/**
 * Section "serve" (issue 2): a real `codemode serve` (from source, podman runtime) under the SDK client.
 * Warm run_python round trip against `podman exec` into the same container, first call against a bare
 * hardened `podman run --rm`, the tools/list size against the three reference servers' own lists, and
 * the serve's resident memory.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { buildRunArgs, runConfigFor } from "../plugins/runtime/oci_base.ts";
import { seccompProfilePath } from "../plugins/runtime/seccomp.ts";
import { autoRuntime, defaults as podmanDefaults } from "../plugins/runtime/podman.ts";
import {
  catalogIndexed,
  exec,
  fakeHome,
  IMAGE,
  percentile,
  referenceServers,
  removeHome,
  removeLeftovers,
  type Row,
  row,
  rssMiB,
  sandboxOf,
  type SectionResult,
  type Served,
  startServe,
  timeEach,
  tokens,
  works,
} from "./bench_harness.ts";

/** Counts of the serve section. */
export const counts = { warm: 200, warmup: 5, exec: 20, freshServes: 5, bareRuns: 10 };

const LIMITS = { memory: "512m", pids: 128 };

/** Milliseconds of one hardened `podman run --rm IMAGE python3 -c pass`, with the plugin's own flags. */
export async function bareRun(i: number): Promise<number> {
  const args = buildRunArgs(
    {
      name: `codemode-bench-bare-${process.pid}-${i}`,
      image: IMAGE,
      command: ["python3", "-c", "pass"],
      limits: LIMITS,
      labels: { "codemode.bench": "true" },
    },
    // The same flags a session gets, seccomp profile included; no channel fd to pass from here.
    {
      ...runConfigFor(
        "podman",
        { ...podmanDefaults, runtime: autoRuntime() },
        LIMITS,
        true,
        await seccompProfilePath(),
      ),
      channel: false,
    },
  );
  const start = performance.now();
  const r = await exec("podman", args);
  if (r.code !== 0) throw new Error(`Bare podman run failed: ${r.stderr.trim()}`);
  return performance.now() - start;
}

/** The tools/list of the reference servers, each asked directly: what codemode's one tool replaces. */
async function directListTokens(home: string): Promise<number> {
  let total = 0;
  const specs = referenceServers(home) as Record<
    string,
    { command: string; args: string[]; env?: Record<string, string> }
  >;
  for (const spec of Object.values(specs)) {
    const client = new Client({ name: "codemode-bench", version: "1" });
    await client.connect(
      new StdioClientTransport({
        ...spec,
        env: { PATH: process.env.PATH ?? "", ...spec.env },
        stderr: "ignore",
      }),
    );
    total += tokens(await client.listTools());
    await client.close();
  }
  return total;
}

/** Runs the serve section. */
export async function benchServe(): Promise<SectionResult> {
  const result: SectionResult = { name: "serve", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  // No prewarm: the first call's figure is meant to include the container start.
  const env = { CODEMODE_RUNTIME: "podman", CODEMODE_PREWARM: "off" };
  const rows: Row[] = result.rows;
  const home = fakeHome();
  // Every serve opened here, so a failure part-way still closes them before their containers are checked.
  const opened: Served[] = [];
  const open = async () => {
    const served = await startServe({ home, env });
    opened.push(served);
    return served;
  };
  try {
    // Bare container starts, interleaved with nothing else: the floor a first call cannot beat.
    await bareRun(0);
    const bare: number[] = [];
    for (let i = 1; i <= counts.bareRuns; i++) bare.push(await bareRun(i));
    const bareP50 = percentile(bare, 0.5);

    // Fresh serves: first call once runtime detection and background indexing are done.
    const first: number[] = [];
    let warmServe: Served | undefined;
    let idleRss: number | undefined;
    let listed: unknown;
    for (let i = 0; i < counts.freshServes; i++) {
      const served = await open();
      await served.runtimeSelected();
      await catalogIndexed(home, 3);
      if (i === 0) {
        listed = await served.client.listTools();
        idleRss = rssMiB(served.pid);
      }
      const start = performance.now();
      await served.run("print(1)");
      first.push(performance.now() - start);
      if (i === 0) warmServe = served;
      else await served.close();
    }
    const firstP50 = percentile(first, 0.5);
    rows.push(row({
      section: "serve",
      metric: `first call, fresh serve (median of ${counts.freshServes})`,
      value: firstP50,
      unit: "ms",
      baseline: { label: `podman run --rm, same flags (p50 of ${counts.bareRuns})`, value: bareP50 },
      goal: { on: "ratio", op: "≤", limit: 1.5 },
      note: `runtime detection done; each: ${first.map((t) => t.toFixed(0)).join(", ")} ms`,
    }));

    // A first call sent right after initialize pays for runtime detection too.
    {
      const served = await open();
      const start = performance.now();
      await served.run("print(1)");
      const ms = performance.now() - start;
      await served.close();
      rows.push(row({
        section: "serve",
        metric: "first call sent right after initialize",
        value: ms,
        unit: "ms",
        baseline: { label: "podman run --rm, same flags (p50)", value: bareP50 },
        note: "includes runtime detection (podman info + a probe container)",
      }));
    }

    const served = warmServe!;
    const sandboxRss = rssMiB(served.pid);
    const warm = await timeEach(counts.warm, counts.warmup, () => served.run("print(1)"));
    const container = await sandboxOf(served.pid);
    if (!container) throw new Error(`No sandbox container labelled codemode.owner-pid=${served.pid}`);
    const execTimes = await timeEach(counts.exec, 1, async () => {
      const r = await exec("podman", ["exec", container, "python3", "-c", "print(1)"]);
      if (r.code !== 0) throw new Error(`podman exec failed: ${r.stderr.trim()}`);
    });
    const execP50 = percentile(execTimes, 0.5);
    const afterRss = rssMiB(served.pid);
    rows.push(row({
      section: "serve",
      metric: `warm run_python print(1) p50 (${counts.warm} calls)`,
      value: percentile(warm, 0.5),
      unit: "ms",
      baseline: { label: `podman exec same container python3 -c (p50 of ${counts.exec})`, value: execP50 },
      goal: { on: "value", op: "<", limit: 10 },
    }));
    rows.push(row({
      section: "serve",
      metric: `warm run_python print(1) p95 (${counts.warm} calls)`,
      value: percentile(warm, 0.95),
      unit: "ms",
      baseline: { label: "podman exec (p50)", value: execP50 },
    }));
    rows.push(row({
      section: "serve",
      metric: "tools/list response (o200k tokens)",
      value: tokens(listed),
      unit: "tokens",
      baseline: {
        label: "tools/list of everything+memory+filesystem, direct",
        value: await directListTokens(home),
      },
      goal: { on: "value", op: "≤", limit: 200 },
    }));
    rows.push(row({
      section: "serve",
      metric: "RSS of serve, idle after initialize (and runtime detection, indexing)",
      value: idleRss ?? 0,
      unit: "MiB",
      note: "deno process VmRSS; upstream servers are separate processes",
    }));
    rows.push(row({
      section: "serve",
      metric: "RSS of serve, sandbox started",
      value: sandboxRss ?? 0,
      unit: "MiB",
      note: `after ${counts.warm + counts.warmup} more calls: ${afterRss} MiB`,
    }));
    await served.close();
  } finally {
    await Promise.allSettled(opened.map((s) => s.close()));
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    removeHome(home);
  }
  return result;
}
