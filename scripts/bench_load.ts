/**
 * Section "load" (issue 6): one `codemode serve --http` (from source, podman runtime) under 20 concurrent
 * Streamable HTTP clients, each making 50 run_python calls that call server-everything's echo and get-sum
 * with `asyncio.gather`. Throughput and latency against one client's sequential runs on the same serve,
 * the time to start 20 sessions at once against starting one, the serve's resident memory (sampled every
 * 100 ms, plus VmHWM) and the sandboxes' memory from `podman stats`.
 * @module
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  catalogIndexed,
  exec,
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  round,
  row,
  type SectionResult,
  sleep,
  sourceCommand,
  works,
} from "./bench_harness.ts";

/** Counts of the load section. */
export const counts = { clients: 20, runs: 50, baselineRuns: 200, warmup: 5 };

/** One run: two proxied calls whose answers depend on the client and the run. */
function program(client: number, run: number): string {
  return `echo, total = await asyncio.gather(
    mcp_everything.echo(message="c${client}-r${run}"),
    mcp_everything.get_sum(a=${client}, b=${run}),
)
(echo, total)`;
}

function expected(client: number, run: number): string {
  return `('Echo: c${client}-r${run}', 'The sum of ${client} and ${run} is ${client + run}.')`;
}

/** A running `serve --http` started by {@link startHttpServe}. */
export interface HttpServe {
  pid: number;
  url: string;
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Starts `codemode serve --http --port 0` in `home` (from source, or with `codemode`, the command that
 * runs another build); resolves once the runtime is chosen.
 */
export async function startHttpServe(
  home: string,
  env: Record<string, string> = {},
  codemode: string[] = sourceCommand(),
): Promise<HttpServe> {
  const [command, ...args] = codemode;
  const child = spawn(command, [...args, "serve", "--http", "--port", "0"], {
    cwd: home,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: home,
      CODEMODE_STATE_DIR: join(home, "state"),
      CODEMODE_LOG_LEVEL: "info",
      CODEMODE_RUNTIME: "podman",
      CODEMODE_TIMEOUT: "60",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr = (stderr + d).slice(-50_000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGTERM");
    await exited;
  };
  const deadline = Date.now() + 60_000;
  let url: string | undefined;
  while (Date.now() < deadline && child.exitCode === null) {
    url = /serving MCP over HTTP at (\S+)/.exec(stderr)?.[1];
    if (url && stderr.includes('"selected runtime"')) break;
    await sleep(100);
  }
  if (!url || !stderr.includes('"selected runtime"')) {
    await stop();
    throw new Error(`serve --http did not start: ${stderr.slice(-500)}`);
  }
  return { pid: child.pid!, url, stderr: () => stderr, stop };
}

/** An MCP client of the load section. */
export interface LoadClient {
  run(code: string): Promise<string>;
  end(): Promise<void>;
}

/** Connects an MCP client to `url` (sending `headers` with every request). */
export async function connect(url: string, headers: Record<string, string> = {}): Promise<LoadClient> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "codemode-bench-load", version: "1" });
  await client.connect(transport);
  return {
    async run(code) {
      const r = await client.callTool({ name: "run_python", arguments: { code } }, { timeout: 180_000 });
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      if (r.isError) throw new Error(`run_python failed: ${text.slice(0, 300)}`);
      return String((r.structuredContent as { value?: unknown } | undefined)?.value ?? text);
    },
    async end() {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
  };
}

/** A field of /proc/<pid>/status in MiB (VmRSS, VmHWM), or undefined once the process is gone. */
function statusMiB(pid: number, field: "VmRSS" | "VmHWM"): number | undefined {
  try {
    const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
      ?.[1];
    return kb ? round(Number(kb) / 1024, 1) : undefined;
  } catch {
    return undefined;
  }
}

/** Memory of each sandbox container of the serve `pid`, in MiB, from one `podman stats --no-stream`. */
async function sandboxMemory(pid: number): Promise<number[]> {
  const names =
    (await exec("podman", ["ps", "--filter", `label=codemode.owner-pid=${pid}`, "--format", "{{.Names}}"]))
      .stdout.split("\n").map((s) => s.trim()).filter(Boolean);
  if (!names.length) return [];
  const r = await exec("podman", ["stats", "--no-stream", "--format", "{{.MemUsage}}", ...names], 60_000);
  const unit: Record<string, number> = {
    b: 1 / 2 ** 20,
    kb: 1 / 1024,
    kib: 1 / 1024,
    mb: 1,
    mib: 1,
    gb: 1024,
    gib: 1024,
  };
  return r.stdout.split("\n").map((line) => /^([\d.]+)\s*([kmg]?i?b)/i.exec(line.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]) * (unit[m[2].toLowerCase()] ?? 1));
}

/** Containers (running or not) still labelled as the serve `pid`'s. */
async function leftovers(pid: number): Promise<string[]> {
  const r = await exec("podman", [
    "ps",
    "-a",
    "--filter",
    `label=codemode.owner-pid=${pid}`,
    "--format",
    "{{.Names}}",
  ]);
  return r.stdout.split("\n").map((s) => s.trim()).filter(Boolean);
}

/** Times `runs` runs of client `c`; returns milliseconds per run and the number of wrong answers. */
async function timedRuns(
  client: LoadClient,
  c: number,
  runs: number,
): Promise<{ ms: number[]; wrong: number }> {
  const ms: number[] = [];
  let wrong = 0;
  for (let r = 0; r < runs; r++) {
    const start = performance.now();
    const value = await client.run(program(c, r));
    ms.push(performance.now() - start);
    if (value !== expected(c, r)) wrong++;
  }
  return { ms, wrong };
}

/** Runs the load section. */
export async function benchLoad(): Promise<SectionResult> {
  const result: SectionResult = { name: "load", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = fakeHome();
  const served = await startHttpServe(home);
  const clients: LoadClient[] = [];
  try {
    await catalogIndexed(home, 3);
    const idleRss = statusMiB(served.pid, "VmRSS");

    // Baseline: one client, sequential runs, on the same serve.
    let start = performance.now();
    const solo = await connect(served.url);
    clients.push(solo);
    await solo.run("import asyncio");
    const soloStart = performance.now() - start;
    await timedRuns(solo, 99, counts.warmup);
    start = performance.now();
    const baseline = await timedRuns(solo, 99, counts.baselineRuns);
    const baselineSeconds = (performance.now() - start) / 1000;
    await solo.end();
    clients.length = 0;

    // Load: 20 sessions start at once, then (all warm) 50 runs each, concurrently.
    start = performance.now();
    const load = await Promise.all(Array.from({ length: counts.clients }, async () => {
      const client = await connect(served.url);
      clients.push(client);
      await client.run("import asyncio");
      return client;
    }));
    const startAll = performance.now() - start;
    await Promise.all(load.map((client, c) => timedRuns(client, c, counts.warmup)));
    const samples: number[] = [];
    const sampler = setInterval(() => {
      const rss = statusMiB(served.pid, "VmRSS");
      if (rss !== undefined) samples.push(rss);
    }, 100);
    start = performance.now();
    const runs = await Promise.all(load.map((client, c) => timedRuns(client, c, counts.runs)));
    const loadSeconds = (performance.now() - start) / 1000;
    clearInterval(sampler);
    const sandboxes = await sandboxMemory(served.pid);
    await sleep(2000);
    const steadyRss = statusMiB(served.pid, "VmRSS");
    const hwm = statusMiB(served.pid, "VmHWM");
    await Promise.all(load.map((c) => c.end()));
    clients.length = 0;
    await sleep(1000);
    const afterRss = statusMiB(served.pid, "VmRSS");

    const all = runs.flatMap((r) => r.ms);
    const wrong = runs.reduce((n, r) => n + r.wrong, 0) + baseline.wrong;
    const total = counts.clients * counts.runs;
    const label = `${counts.clients} clients x ${counts.runs} runs`;
    const soloLabel = `1 client, ${counts.baselineRuns} sequential runs`;
    result.rows.push(
      row({
        section: "load",
        metric: `runs/s, ${label} (2 proxied calls each)`,
        value: total / loadSeconds,
        unit: "runs/s",
        baseline: { label: soloLabel, value: counts.baselineRuns / baselineSeconds },
        note: `${total} runs in ${loadSeconds.toFixed(1)} s`,
      }),
      row({
        section: "load",
        metric: `run_python latency p50, ${label}`,
        value: percentile(all, 0.5),
        unit: "ms",
        baseline: { label: `${soloLabel}, p50`, value: percentile(baseline.ms, 0.5) },
      }),
      row({
        section: "load",
        metric: `run_python latency p95, ${label}`,
        value: percentile(all, 0.95),
        unit: "ms",
        baseline: { label: `${soloLabel}, p95`, value: percentile(baseline.ms, 0.95) },
        note: `max ${Math.max(...all).toFixed(0)} ms`,
      }),
      row({
        section: "load",
        metric: `${counts.clients} sessions started at once (connect + first run, wall)`,
        value: startAll,
        unit: "ms",
        baseline: { label: "1 session (connect + first run)", value: soloStart },
        note: "each session starts its own sandbox container",
      }),
      row({
        section: "load",
        metric: "RSS of serve, idle (runtime chosen, servers indexed)",
        value: idleRss ?? 0,
        unit: "MiB",
        note: "deno VmRSS; upstream servers and sandboxes are separate processes",
      }),
      row({
        section: "load",
        metric: `RSS of serve, peak under load (sampled every 100 ms)`,
        value: samples.length ? Math.max(...samples) : 0,
        unit: "MiB",
        baseline: { label: "idle", value: idleRss ?? 0 },
        note: `VmHWM (peak since start) ${hwm} MiB; ${samples.length} samples`,
      }),
      row({
        section: "load",
        metric: `RSS of serve, ${counts.clients} sessions open, 2 s after the load`,
        value: steadyRss ?? 0,
        unit: "MiB",
        baseline: { label: "idle", value: idleRss ?? 0 },
        note: `after every session ended (DELETE): ${afterRss} MiB`,
      }),
    );
    if (sandboxes.length) {
      const sum = sandboxes.reduce((a, b) => a + b, 0);
      result.rows.push(row({
        section: "load",
        metric: `memory of the ${sandboxes.length} sandbox containers, total (podman stats)`,
        value: sum,
        unit: "MiB",
        note: `per container p50 ${percentile(sandboxes, 0.5).toFixed(1)} MiB, max ${
          Math.max(...sandboxes).toFixed(1)
        } MiB (cgroup usage, page cache included)`,
      }));
    } else {
      result.notes.push("podman stats gave no memory figures for the sandboxes");
    }
    result.notes.push(
      `every run's answer was checked: ${wrong} wrong of ${total + counts.baselineRuns}`,
      "clients run in this benchmark's process (Deno), so client work shares the 2 cores with the serve",
    );
  } finally {
    await Promise.allSettled(clients.map((c) => c.end()));
    await served.stop();
    const left = await leftovers(served.pid);
    for (const name of left) await exec("podman", ["rm", "-f", "-t", "0", name]);
    result.notes.push(
      left.length ? `removed leftover containers: ${left.join(", ")}` : "no container left after SIGTERM",
    );
    removeHome(home);
  }
  return result;
}
