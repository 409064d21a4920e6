/**
 * What tracing adds to one tool call, on the host alone: the sandbox API's `call_tool` (policy, dispatch,
 * the call's span, the `traceparent` put in `_meta`, the result's attributes) served in this process for
 * a pool that answers at once, inside a run's log scope and span, 100 calls gathered at a time as a
 * gathered run makes them. Rounds with tracing off and on alternate in one process (tracing is stopped
 * and started again between them), so both see the same JIT and the same load; the collector is a child
 * process that answers every export (`--collector live`, the default) or a port nothing listens on
 * (`--collector down`). Prints one JSON object: host CPU per call (µs), off and on, per round and median,
 * for the whole process and for its main thread alone (spans are exported by a worker thread).
 *
 * Run by `deno run -A scripts/trace_call_probe.ts` (or `bun`); OTEL_BSP_* variables apply. See BENCHMARKS.md,
 * "tracing", for what it measured.
 *
 *   trace_call_probe.ts [--calls 100] [--batches 50] [--rounds 7] [--collector live|down]
 *                       [--upstream fake|real|sandbox] [--profile FILE]
 *     --upstream  real: server-everything over the real pool (stdio, lean calls) instead of a pool that
 *                 answers at once; sandbox: that, with the calls made by Python in a podman sandbox
 *                 (`asyncio.gather`), as in a serve (the closest to a serve's figure; --batches 10 is plenty)
 *     --profile   also write a CPU profile of one traced round (a .cpuprofile) and its self time by file
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import process from "node:process";
import { type CpuProfile, cpuProfile } from "./cpu_profile.ts";
import { Policy } from "../core/config/policy.ts";
import { sandboxApi, type ToolCaller } from "../core/host_api/api.ts";
import { toolResultForPython } from "../core/host_api/tool_result.ts";
import { UpstreamPool } from "../core/upstream/pool.ts";
import { SessionManager } from "../core/sandbox/session_manager.ts";
import { podman } from "../plugins/runtime/podman.ts";
import { bootstrapCommand, bootstrapFrame } from "../sandbox/source.ts";
import { withLogScope } from "../core/observe/log.ts";
import { startRunSpan, startTracing, stopTracing } from "../core/observe/trace.ts";
import type { TraceContext } from "../core/observe/span.ts";
import type { ServerSpec } from "../core/contracts/discovery.ts";

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? argv[at + 1] : fallback;
};
const calls = Number(option("calls", "100"));
const batches = Number(option("batches", "50"));
const rounds = Number(option("rounds", "7"));
const collector = option("collector", "live");
const profileFile = option("profile", "");
const upstream = option("upstream", "fake");
const EVERYTHING =
  new URL("../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url)
    .pathname;

/** A collector in a child process (its CPU is not the host's): answers every POST with 200. */
async function startSink(): Promise<{ url: string; child?: ChildProcess }> {
  if (collector === "down") {
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    return { url: `http://127.0.0.1:${port}` };
  }
  // It says how many bytes it received when asked (GET), so a probe can tell that no span was dropped.
  const code =
    `let n = 0; const s = require("node:http").createServer((q, r) => { q.on("data", (d) => n += ` +
    `d.length); q.on("end", () => q.method === "GET" ? r.end(String(n)) : ` +
    `r.writeHead(200, {"content-type": "application/x-protobuf"}).end()); });` +
    `s.listen(0, "127.0.0.1", () => console.log(s.address().port));`;
  const child = spawn("node", ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((resolve) =>
    child.stdout!.once("data", (d) => resolve(String(d).trim()))
  );
  return { url: `http://127.0.0.1:${port}`, child };
}

const EVERYTHING_SPEC: ServerSpec = {
  name: "everything",
  transport: "stdio",
  command: "node",
  args: [EVERYTHING, "stdio"],
  source: { plugin: "bench", file: "trace_call_probe.ts", key: "everything" },
};
const seen: (TraceContext | undefined)[] = [];
const fake: ToolCaller = {
  names: () => ["everything"],
  spec: () => EVERYTHING_SPEC,
  listTools: () =>
    Promise.resolve([{ name: "echo", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } }]),
  callToolReply: (_name, _tool, args, options) => {
    seen.push(options?.meta);
    if (seen.length > 2) seen.shift();
    return Promise.resolve({ result: { content: [{ type: "text", text: `Echo: ${args.message}` }] } });
  },
};
const real = upstream === "fake" ? undefined : new UpstreamPool([EVERYTHING_SPEC]);
const rpc = sandboxApi(
  real ?? fake,
  { search: () => [], docs: () => [] },
  real ? toolResultForPython : (reply) => reply.result,
  new Policy(),
);

/** With `--upstream sandbox`: the sandbox that makes the calls (podman), as a serve's would. */
const sessions = upstream === "sandbox"
  ? new SessionManager({
    runtime: () => Promise.resolve(podman()),
    image: process.env.CODEMODE_IMAGE ?? "codemode-sandbox:latest",
    limits: { memory: "512m", pids: 64 },
    command: bootstrapCommand(),
    bootstrap: () =>
      bootstrapFrame({ max_output: 1 << 20, servers: [{ name: "everything", alias: "everything" }] }),
    rpc,
    maxOutput: 1 << 20,
    idleTimeout: 600,
  })
  : undefined;
const GATHER = `import asyncio
r = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(${calls})])`;

/**
 * `batches` runs, each of `calls` tool calls gathered, in the run's log scope and span; a millisecond's
 * pause between runs (as between a client's runs) lets the batched export keep up, so no span is dropped.
 */
async function run(): Promise<void> {
  for (let b = 0; b < batches; b++) {
    const scope = { requestId: `probe-${b}` };
    const context = { session: "probe", signal: new AbortController().signal, requestId: scope.requestId };
    await withLogScope(scope, async () => {
      const span = startRunSpan(scope, { "codemode.session": "probe" });
      if (sessions) {
        const result = await sessions.run("probe", GATHER, { timeout: 600 });
        if (result.status !== "ok") throw new Error(`probe run failed: ${result.error}`);
      } else {
        await Promise.all(
          Array.from({ length: calls }, (_, i) =>
            rpc(
              "call_tool",
              { server: "everything", tool: "echo", arguments: { message: String(i) } },
              context,
            )),
        );
      }
      span.end();
    });
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

const cpuUs = () => {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
};
/**
 * The main thread's CPU alone (Linux: its schedstat, in ns), without the span export worker's: what the
 * event loop that serves runs pays.
 */
const mainThreadUs = () => {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
  } catch {
    return NaN;
  }
};
/**
 * Host CPU per call of `batches` runs, the whole process's and the main thread's; traced: from starting
 * tracing to its last export, inclusive.
 */
const perCall = async (traced: boolean) => {
  const [started, mainStarted] = [cpuUs(), mainThreadUs()];
  if (traced) await tracing();
  await run();
  if (traced) await stopTracing();
  return {
    all: (cpuUs() - started) / (calls * batches),
    main: (mainThreadUs() - mainStarted) / (calls * batches),
  };
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const sink = await startSink();
/** Bytes the live collector has received so far. */
const received = async () => sink.child ? Number(await (await fetch(sink.url)).text()) : 0;
const tracing = () =>
  startTracing({
    url: `${sink.url}/v1/traces`,
    env: process.env, // OTEL_BSP_* apply
    content: false,
    version: "probe",
    node: "probe",
    redact: (text) => text,
  });
const rows: { off: number; on: number; mainOff: number; mainOn: number }[] = [];
try {
  await run(); // warm the untraced path
  await tracing();
  await run(); // and the traced one
  await stopTracing();
  const receivedBefore = await received();
  for (let round = 0; round < rounds; round++) {
    const off = await perCall(false);
    const on = await perCall(true);
    const r = (x: number) => Math.round(x * 10) / 10;
    rows.push({ off: r(off.all), on: r(on.all), mainOff: r(off.main), mainOn: r(on.main) });
  }
  let files: Record<string, number> | undefined;
  if (profileFile) {
    await tracing();
    const profile = await cpuProfile(profileFile, 100, async () => {
      await run();
      await stopTracing();
    });
    files = selfTimeByFile(profile);
  }
  const off = median(rows.map((r) => r.off)), on = median(rows.map((r) => r.on));
  const mainOff = median(rows.map((r) => r.mainOff)), mainOn = median(rows.map((r) => r.mainOn));
  console.log(JSON.stringify({
    collector,
    upstream,
    calls,
    batches,
    medianUsPerCall: { off, on, added: Math.round((on - off) * 10) / 10 },
    mainThreadMedianUsPerCall: { off: mainOff, on: mainOn, added: Math.round((mainOn - mainOff) * 10) / 10 },
    exportedBytesPerTracedCall: sink.child
      ? Math.round(((await received()) - receivedBefore) / (rounds * calls * batches))
      : undefined,
    rows,
    traceparents: seen.map((m) => m?.traceparent),
    ...(files ? { selfTimeByFile: files } : {}),
  }));
} finally {
  sink.child?.kill();
  await sessions?.closeAll();
  await real?.close();
}

/** Self time share of a CPU profile by file (node_modules packages by package), top 25. */
function selfTimeByFile(profile: CpuProfile): Record<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const shares: Record<string, number> = {};
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const { url, functionName } = byId.get(profile.samples[i])!.callFrame;
    if (functionName === "(idle)" || url.includes("inspector")) continue;
    const pkg = /node_modules\/(?:\.deno\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(url);
    const key = pkg
      ? `${pkg[1]}/${pkg[2].split("/").pop()} ${functionName}`
      : `${url.split("/").slice(-2).join("/")} ${functionName}`;
    shares[key] = (shares[key] ?? 0) + profile.timeDeltas[i];
    total += profile.timeDeltas[i];
  }
  return Object.fromEntries(
    Object.entries(shares).sort((a, b) => b[1] - a[1]).slice(0, 40)
      .map(([k, v]) => [k, Math.round(1000 * v / total) / 1000]),
  );
}
process.exit(0);
