/**
 * Where the time of one proxied tool call goes: the host runs in this process (the same sandbox API,
 * session and upstream pool a serve uses, over a podman sandbox and server-everything), so its CPU can
 * be read per call and, with `--profile`, sampled by V8's profiler and split into stages. Runs under
 * Deno and Bun alike (`bun scripts/hot_path_probe.ts` is the binary's runtime); prints one JSON object.
 * Used by the "hotpath" section of `deno task bench` (scripts/bench_hot_path.ts).
 *
 *   hot_path_probe.ts [--calls N] [--rounds R] [--sdk] [--profile FILE]
 *     --sdk      tools/call through the SDK client (`request`, legacy era) instead of the lean path
 *     --profile  also write the host's CPU profile of one block (a .cpuprofile, for a flame graph)
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { type CpuProfile, cpuProfile } from "./cpu_profile.ts";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Policy } from "../core/config/policy.ts";
import { sandboxApi } from "../core/host_api/api.ts";
import { toolResultForPython } from "../core/host_api/tool_result.ts";
import { UpstreamPool } from "../core/upstream/pool.ts";
import { pinSandbox, probeSandbox } from "./_probe_sandbox.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? argv[at + 1] : fallback;
};
const calls = Number(option("calls", "500"));
const rounds = Number(option("rounds", "5"));
const profileFile = option("profile", "");

/** Milliseconds of CPU this process has used. */
const hostCpu = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};
/** Milliseconds of CPU another process has used (Linux /proc; clock ticks of 10 ms). */
const processCpu = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

/** Self time of a V8 CPU profile, by stage of the proxied call (files and functions decide). */
function stagesOf(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const stages: Record<string, number> = {};
  for (let i = 0; i < profile.samples.length; i++) {
    const frame = byId.get(profile.samples[i])!.callFrame;
    const stage = stageOf(frame.url, frame.functionName);
    stages[stage] = (stages[stage] ?? 0) + (profile.timeDeltas[i] ?? 0);
  }
  delete stages.idle;
  delete stages.profiler;
  const total = Object.values(stages).reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, Math.round(1000 * v / total) / 1000]));
}

function stageOf(url: string, name: string): string {
  if (name === "(idle)") return "idle";
  if (url.includes("inspector")) return "profiler";
  if (name === "(garbage collector)") return "garbage collection";
  // Native writes: the syscall, and the wake-up of the process at the other end (often run right away).
  if (!url && /^(writeBuffer|writeUtf8String|writev|writeBuffered|write)$/.test(name)) {
    return "writes (kernel)";
  }
  if (/@modelcontextprotocol|zod|ajv/.test(url) || url.includes("/core/upstream/")) return "upstream client";
  if (url.includes("/core/host_api/") || url.includes("/core/config/") || url.includes("/core/catalog/")) {
    return "host API (policy, dispatch)";
  }
  if (/core\/sandbox\/(session|protocol|run_calls)/.test(url)) return "frames: parse, check, answer";
  if (url.includes("/core/observe/") || url.includes("prom-client")) return "stats and logs";
  if (/frame_link|frame_reader/.test(url)) return "sandbox channel I/O";
  return "runtime I/O, promises and timers";
}

const pool = new UpstreamPool([
  {
    name: "everything",
    transport: "stdio",
    command: "node",
    args: [EVERYTHING, "stdio"],
    source: probeSource(),
  },
], { leanCalls: !flag("sdk") });
const rpc = sandboxApi(pool, { search: () => [], docs: () => [] }, toolResultForPython, new Policy());
const { run, close } = probeSandbox(rpc, [{ name: "everything", alias: "everything" }]);

function probeSource() {
  return { plugin: "bench", file: "hot_path_probe.ts", key: "everything" };
}

const WARM_UP = pinSandbox() + `
import json, time, timeit
from mcp import runtime
from codemode_runtime import frames, rpc
ev = mcp_everything
for i in range(1000):
    await ev.echo(message="warm")
for i in range(200):
    await runtime.list_servers()
`;
const ECHOES = `
t = time.perf_counter(); c = time.process_time()
for i in range(${calls}):
    await ev.echo(message=str(i))
print(json.dumps([(time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000]))
`;
/** The sandbox<->host hop alone: a call the host answers from what it knows, no upstream server. */
const HOPS = `
t = time.perf_counter()
for i in range(${calls}):
    await runtime.list_servers()
print(json.dumps((time.perf_counter() - t) * 1000))
`;
/** The sandbox's own per-frame work, timed in place: encoding a call, decoding and unwrapping its answer. */
const FRAME_WORK = `
call = {"type": "rpc", "id": 7, "method": "call_tool",
        "params": {"server": "everything", "tool": "echo", "arguments": {"message": "7"}, "raw": False}}
answer = (b'{"type":"rpc_result","id":7,"ok":true,"raw":false,"reply":{"result":{"content":'
          b'[{"type":"text","text":"Echo: 7"}]},"jsonrpc":"2.0","id":"codemode-7"}}')
n = 20000
encode = min(timeit.repeat(lambda: frames.encode(call), number=n, repeat=3)) / n * 1e6
decode = min(timeit.repeat(lambda: rpc.result_of(frames.decode(answer)), number=n, repeat=3)) / n * 1e6
print(json.dumps([encode, decode]))
`;

const us = (ms: number) => Math.round((ms / calls) * 1000);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

try {
  await run(WARM_UP);
  const serverPid = pool.status("everything").pid!;
  const client = new Client({ name: "hot-path-probe", version: "1" });
  const transport = new StdioClientTransport({
    command: "node",
    args: [EVERYTHING, "stdio"],
    stderr: "ignore",
    env: { PATH: process.env.PATH ?? "" },
  });
  await client.connect(transport);
  for (let i = 0; i < 1000; i++) await client.callTool({ name: "echo", arguments: { message: "warm" } });
  const directPid = transport.pid!;
  const rows: Record<string, number>[] = [];
  for (let round = 0; round < rounds; round++) {
    const host = hostCpu(), server = processCpu(serverPid);
    const [wall, sandbox] = JSON.parse(await run(ECHOES)) as number[];
    const hostMs = hostCpu() - host;
    const serverMs = processCpu(serverPid) - server;
    const hop = JSON.parse(await run(HOPS)) as number;
    const directHost = hostCpu(), directServer = processCpu(directPid), started = performance.now();
    for (let i = 0; i < calls; i++) {
      await client.callTool({ name: "echo", arguments: { message: String(i) } });
    }
    rows.push({
      wall: us(wall),
      sandboxCpu: us(sandbox),
      hostCpu: us(hostMs),
      serverCpu: us(serverMs),
      hop: us(hop),
      directWall: us(performance.now() - started),
      directClientCpu: us(hostCpu() - directHost),
      directServerCpu: us(processCpu(directPid) - directServer),
    });
  }
  const [encodeUs, decodeUs] = JSON.parse(await run(FRAME_WORK)) as number[];
  let stages: Record<string, number> | undefined;
  if (profileFile) {
    stages = stagesOf(await cpuProfile(profileFile, 200, () => run(ECHOES)));
  }
  await client.close();
  const keys = Object.keys(rows[0]);
  console.log(JSON.stringify({
    runtime: "Bun" in globalThis ? "bun" : "deno",
    path: flag("sdk") ? "sdk" : "lean",
    calls,
    rounds,
    median: Object.fromEntries(keys.map((k) => [k, median(rows.map((r) => r[k]))])),
    rows,
    sandboxFrameUs: {
      encode: Math.round(encodeUs * 10) / 10,
      decodeAndUnwrap: Math.round(decodeUs * 10) / 10,
    },
    ...(stages ? { stages } : {}),
  }));
} finally {
  await close();
  await pool.close();
}
process.exit(0);
