/**
 * Section "proxy" (issues 3 and 32): the cost of calling an MCP tool from sandbox code instead of directly, how
 * much `asyncio.gather` overlaps proxied calls, and whether tools/list grows with configured servers.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { existsSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import {
  BINARY,
  catalogIndexed,
  fakeHome,
  IMAGE,
  percentile,
  referenceServers,
  removeHome,
  removeLeftovers,
  ROOT,
  type Row,
  row,
  type SectionResult,
  startServe,
  tokens,
  works,
} from "./bench_harness.ts";

/** Counts and the latency tool of the proxy section. */
export const counts = {
  sequential: 500,
  rounds: 10,
  parallel: 100,
  latencySeconds: 0.05,
  configured: 30,
  /** Sequential echo calls each side makes before timing: with 20, both JITs were still warming up. */
  warmUp: 1000,
};

const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const block = counts.sequential / counts.rounds;

const WARM_UP = `
import asyncio, json, time
from mcp import runtime
ev = mcp_everything
slow = ev.trigger_long_running_operation
for i in range(${counts.warmUp}):
    await ev.echo(message="warm")
for i in range(200):
    await runtime.list_servers()
await asyncio.gather(*[ev.echo(message="warm") for i in range(${counts.parallel})])
await slow(duration=${counts.latencySeconds}, steps=1)

def ms(start):
    return (time.perf_counter() - start) * 1000
`;

/** One block of sequential echo calls, each timed, then as many host-only RPCs (no upstream), timed
 * inside Python. */
const ECHO_BLOCK = `
calls = []
for i in range(${block}):
    t = time.perf_counter()
    await ev.echo(message=str(i))
    calls.append(ms(t))
t = time.perf_counter()
for i in range(${block}):
    await runtime.list_servers()
print(json.dumps([calls, ms(t)]))
`;

/** Sequential against gathered calls of echo and of a tool with latency, timed inside Python. */
const PARALLEL = `
t = time.perf_counter()
for i in range(${counts.parallel}):
    await ev.echo(message=str(i))
echo_seq = ms(t)
t = time.perf_counter()
out = await asyncio.gather(*[ev.echo(message=str(i)) for i in range(${counts.parallel})])
echo_par = ms(t)
if out[7] != "Echo: 7":
    raise RuntimeError(f"unexpected echo result {out[7]!r}")

t = time.perf_counter()
for i in range(${counts.parallel}):
    await slow(duration=${counts.latencySeconds}, steps=1)
slow_seq = ms(t)
t = time.perf_counter()
await asyncio.gather(*[slow(duration=${counts.latencySeconds}, steps=1) for i in range(${counts.parallel})])
slow_par = ms(t)
print(json.dumps(dict(echo_seq=echo_seq, echo_par=echo_par, slow_seq=slow_seq, slow_par=slow_par)))
`;

type ParallelTimes = Record<"echo_seq" | "echo_par" | "slow_seq" | "slow_par", number>;

/** An SDK client straight to server-everything, warmed up with `warmUp` echo calls: the direct baseline. */
export async function directClient(warmUp = counts.warmUp): Promise<Client> {
  const client = new Client({ name: "codemode-bench", version: "1" });
  await client.connect(
    new StdioClientTransport({
      command: "node",
      args: [EVERYTHING, "stdio"],
      env: { PATH: process.env.PATH ?? "" },
      stderr: "ignore",
    }),
  );
  for (let i = 0; i < warmUp; i++) await client.callTool({ name: "echo", arguments: { message: "warm" } });
  return client;
}

/** Milliseconds of each of `n` sequential echo calls through `client`. */
async function directEchoCalls(client: Client, n: number): Promise<number[]> {
  const calls: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await client.callTool({ name: "echo", arguments: { message: String(i) } });
    calls.push(performance.now() - start);
  }
  return calls;
}

/** tools/list of a serve whose HOME configures `servers`; the serve is closed before returning. */
async function listedWith(servers: (home: string) => Record<string, unknown>): Promise<unknown> {
  const home = fakeHome(servers);
  try {
    const served = await startServe({ home, env: { CODEMODE_RUNTIME: "podman" } });
    const listed = await served.client.listTools();
    await served.close();
    return listed;
  } finally {
    removeHome(home);
  }
}

/** Thirty configured servers: the three reference ones and 27 that never need to start. */
function manyServers(home: string): Record<string, unknown> {
  const servers: Record<string, unknown> = { ...referenceServers(home) };
  for (let i = 1; Object.keys(servers).length < counts.configured; i++) {
    servers[`bench-absent-${i}`] = { command: "codemode-bench-absent-server", args: [String(i)] };
  }
  return servers;
}

/** The serve builds measured for proxy overhead: from source, and the shipped binary when it is built. */
function serveTargets(): { label: string; command?: string[] }[] {
  const targets: { label: string; command?: string[] }[] = [{ label: "from source (Deno)" }];
  if (existsSync(BINARY)) targets.push({ label: "compiled binary", command: [BINARY] });
  // Another build to compare in the same run (e.g. the binary of an earlier commit).
  const other = process.env.CODEMODE_BENCH_OTHER_BINARY;
  if (other && existsSync(other)) targets.push({ label: `other binary ${other}`, command: [other] });
  return targets;
}

/** Sequential echo and host-only calls from one serve, in blocks alternating with the direct client. */
async function sequentialTimes(
  home: string,
  direct: Client,
  command: string[] | undefined,
  parallel: boolean,
): Promise<Sequential & { times?: ParallelTimes }> {
  const served = await startServe({ home, env: { CODEMODE_RUNTIME: "podman" }, command });
  // Blocks of proxied and direct calls alternate, so a change in machine load hits both sides alike.
  const proxied: number[][] = [];
  const straight: number[][] = [];
  const rpcOnly: number[] = [];
  try {
    await served.runtimeSelected();
    await catalogIndexed(home, 3);
    await served.run(WARM_UP);
    for (let round = 0; round < counts.rounds; round++) {
      const [echo, hostOnly] = JSON.parse((await served.run(ECHO_BLOCK)).text) as [number[], number];
      proxied.push(echo);
      rpcOnly.push(hostOnly);
      straight.push(await directEchoCalls(direct, block));
    }
    if (!parallel) return { proxied, straight, rpcOnly };
    const { text } = await served.run(PARALLEL);
    return {
      proxied,
      straight,
      rpcOnly,
      times: JSON.parse(text.trim().split("\n").at(-1)!) as ParallelTimes,
    };
  } finally {
    await served.close();
  }
}

/** Per-call times of each alternating block, proxied and direct, and the host-only block times. */
interface Sequential {
  proxied: number[][];
  straight: number[][];
  rpcOnly: number[];
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** How a side's calls spread: the median, and the share of the total spent in calls over 2 ms. */
function spread(calls: number[]): string {
  const slow = sum(calls.filter((ms) => ms > 2));
  return `median ${percentile(calls, 0.5).toFixed(3)} ms, ${
    (100 * slow / sum(calls)).toFixed(0)
  }% of the time in ` +
    `calls over 2 ms`;
}

/** The proxy-overhead rows of one serve build. */
function sequentialRows(label: string, { proxied, straight, rpcOnly }: Sequential): Row[] {
  const proxiedCalls = proxied.flat();
  const straightCalls = straight.flat();
  const proxiedMs = sum(proxiedCalls);
  return [
    row({
      section: "proxy",
      metric: `${counts.sequential} sequential echo calls from sandbox code, serve ${label}`,
      value: proxiedMs,
      unit: "ms",
      baseline: {
        label: `${counts.sequential} echo calls, SDK client → server-everything`,
        value: sum(straightCalls),
      },
      goal: { on: "ratio", op: "≤", limit: 1.2 },
      note:
        `per call ${(proxiedMs / counts.sequential).toFixed(3)} ms vs ${
          (sum(straightCalls) / counts.sequential).toFixed(3)
        } ms; proxied ${spread(proxiedCalls)}; direct ${
          spread(straightCalls)
        }; ${counts.rounds} alternating ` +
        `blocks of ${block}, per-block ratios ${
          proxied.map((p, i) => (sum(p) / sum(straight[i])).toFixed(2)).join(", ")
        }`,
    }),
    row({
      section: "proxy",
      metric: `${counts.sequential} sequential runtime.list_servers() from sandbox code, serve ${label}`,
      value: sum(rpcOnly),
      unit: "ms",
      baseline: { label: "the echo calls from sandbox code above", value: proxiedMs },
      note: `per call ${
        (sum(rpcOnly) / counts.sequential).toFixed(3)
      } ms: the sandbox↔host hop alone, no upstream`,
    }),
  ];
}

/** Runs the proxy section. */
export async function benchProxy(): Promise<SectionResult> {
  const result: SectionResult = { name: "proxy", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = fakeHome();
  try {
    const direct = await directClient();
    let times: ParallelTimes | undefined;
    try {
      for (const [i, target] of serveTargets().entries()) {
        const measured = await sequentialTimes(home, direct, target.command, i === 0);
        times ??= measured.times;
        result.rows.push(...sequentialRows(target.label, measured));
      }
    } finally {
      await direct.close();
    }
    if (!times) throw new Error("The parallel block did not run");
    const n = counts.parallel;
    result.rows.push(
      row({
        section: "proxy",
        metric: `${n} × trigger-long-running-operation (${counts.latencySeconds} s) under asyncio.gather`,
        value: times.slow_par,
        unit: "ms",
        baseline: { label: `${n} sequential, same tool, sandbox code`, value: times.slow_seq },
        goal: { on: "ratio", op: "≥", limit: 5 },
        speedup: true,
      }),
      row({
        section: "proxy",
        metric: `${n} × echo under asyncio.gather`,
        value: times.echo_par,
        unit: "ms",
        baseline: { label: `${n} sequential echo, sandbox code`, value: times.echo_seq },
        speedup: true,
        note: "no latency to hide: only round-trip overhead overlaps",
      }),
    );
    const three = await listedWith(referenceServers);
    const thirty = await listedWith(manyServers);
    const same = JSON.stringify(three) === JSON.stringify(thirty);
    result.rows.push(row({
      section: "proxy",
      metric: `tools/list tokens, ${counts.configured} servers configured`,
      value: tokens(thirty),
      unit: "tokens",
      baseline: { label: "3 servers configured", value: tokens(three) },
      goal: { on: "ratio", op: "=", limit: 1 },
      note: same ? "byte-identical responses" : "responses differ",
    }));
    result.notes.push(
      "Parallelism is measured with server-everything's trigger-long-running-operation (steps=1), whose " +
        `${counts.latencySeconds} s wait stands in for a tool that does I/O: gather can only help where there ` +
        "is latency to overlap; echo answers in microseconds, so its figure shows pipelining of overhead only.",
    );
  } finally {
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    removeHome(home);
  }
  return result;
}
