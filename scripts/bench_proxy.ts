/**
 * Section "proxy" (issue 3): the cost of calling an MCP tool from sandbox code instead of directly, how
 * much `asyncio.gather` overlaps proxied calls, and whether tools/list grows with configured servers.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { join } from "node:path";
import {
  catalogIndexed,
  fakeHome,
  IMAGE,
  referenceServers,
  removeHome,
  removeLeftovers,
  ROOT,
  row,
  type SectionResult,
  startServe,
  tokens,
  works,
} from "./bench_harness.ts";

/** Counts and the latency tool of the proxy section. */
export const counts = { sequential: 500, parallel: 100, latencySeconds: 0.05, configured: 30 };

const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

/** Python that times its own loops with perf_counter and prints them as JSON. */
const SANDBOX_CODE = `
import asyncio, json, time
ev = mcp_everything
slow = ev.trigger_long_running_operation
for i in range(20):
    await ev.echo(message="warm")
await asyncio.gather(*[ev.echo(message="warm") for i in range(${counts.parallel})])
await slow(duration=${counts.latencySeconds}, steps=1)

def ms(start):
    return (time.perf_counter() - start) * 1000

t = time.perf_counter()
for i in range(${counts.sequential}):
    await ev.echo(message=str(i))
echo_seq = ms(t)

t = time.perf_counter()
for i in range(${counts.parallel}):
    await ev.echo(message=str(i))
echo_seq100 = ms(t)
t = time.perf_counter()
out = await asyncio.gather(*[ev.echo(message=str(i)) for i in range(${counts.parallel})])
echo_par100 = ms(t)
assert out[7] == "Echo: 7", out[7]

t = time.perf_counter()
for i in range(${counts.parallel}):
    await slow(duration=${counts.latencySeconds}, steps=1)
slow_seq = ms(t)
t = time.perf_counter()
await asyncio.gather(*[slow(duration=${counts.latencySeconds}, steps=1) for i in range(${counts.parallel})])
slow_par = ms(t)
print(json.dumps(dict(echo_seq=echo_seq, echo_seq100=echo_seq100, echo_par100=echo_par100,
                      slow_seq=slow_seq, slow_par=slow_par)))
`;

type SandboxTimes = Record<"echo_seq" | "echo_seq100" | "echo_par100" | "slow_seq" | "slow_par", number>;

/** Milliseconds for `n` sequential echo calls straight from the SDK client to server-everything. */
async function directEchoMs(n: number): Promise<number> {
  const client = new Client({ name: "codemode-bench", version: "1" });
  await client.connect(
    new StdioClientTransport({
      command: "node",
      args: [EVERYTHING, "stdio"],
      env: { PATH: process.env.PATH ?? "" },
      stderr: "ignore",
    }),
  );
  try {
    for (let i = 0; i < 20; i++) await client.callTool({ name: "echo", arguments: { message: "warm" } });
    const start = performance.now();
    for (let i = 0; i < n; i++) await client.callTool({ name: "echo", arguments: { message: String(i) } });
    return performance.now() - start;
  } finally {
    await client.close();
  }
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

/** Runs the proxy section. */
export async function benchProxy(): Promise<SectionResult> {
  const result: SectionResult = { name: "proxy", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = fakeHome();
  try {
    // Direct calls before and after the serve; the faster is the baseline (the stricter ratio).
    const directBefore = await directEchoMs(counts.sequential);
    const served = await startServe({ home, env: { CODEMODE_RUNTIME: "podman" } });
    let times: SandboxTimes;
    try {
      await served.runtimeSelected();
      await catalogIndexed(home, 3);
      const { text } = await served.run(SANDBOX_CODE);
      times = JSON.parse(text.trim().split("\n").at(-1)!) as SandboxTimes;
    } finally {
      await served.close();
    }
    const direct = Math.min(directBefore, await directEchoMs(counts.sequential));
    const n = counts.parallel;
    result.rows.push(
      row({
        section: "proxy",
        metric: `${counts.sequential} sequential echo calls from sandbox code`,
        value: times.echo_seq,
        unit: "ms",
        baseline: { label: `${counts.sequential} echo calls, SDK client → server-everything`, value: direct },
        target: "ratio ≤ 1.5",
        note: `per call: ${(times.echo_seq / counts.sequential).toFixed(3)} ms vs ${
          (direct / counts.sequential).toFixed(3)
        } ms direct`,
      }),
      row({
        section: "proxy",
        metric: `${n} × trigger-long-running-operation (${counts.latencySeconds} s) under asyncio.gather`,
        value: times.slow_par,
        unit: "ms",
        baseline: { label: `${n} sequential, same tool, sandbox code`, value: times.slow_seq },
        target: "speed-up ≥ 5x",
        speedup: true,
      }),
      row({
        section: "proxy",
        metric: `${n} × echo under asyncio.gather`,
        value: times.echo_par100,
        unit: "ms",
        baseline: { label: `${n} sequential echo, sandbox code`, value: times.echo_seq100 },
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
      target: "unchanged",
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
