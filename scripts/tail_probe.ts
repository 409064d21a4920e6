/**
 * Where the slow proxied calls come from (issue 32): sequential `echo` calls from sandbox code through a
 * serve, in blocks alternating with an SDK client calling its own server-everything (as the proxy bench
 * does), each call timed in the sandbox and split at the moments server-everything read the request and
 * wrote the answer (scripts/tail_probe_server.cjs, preloaded into it). For the calls over 2 ms it says
 * which part took the time: getting to the server (sandbox → host → server, the host's dispatch
 * included), the server itself, or getting back (server → host → sandbox); and how many of them
 * overlapped a garbage collection of the server or of the sandbox's Python. Prints one JSON object.
 *
 *   tail_probe.ts [--binary PATH] [--rounds N] [--env NAME=VALUE]... [--python CODE]
 *     --binary  the serve to measure (default: from source)
 *     --env     set in the serve's environment (e.g. CODEMODE_ACTIVITY=0)
 *     --python  run in the sandbox before the timed calls (e.g. "import sys; sys.setswitchinterval(0.001)")
 * @module
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import {
  catalogIndexed,
  fakeHome,
  percentile,
  referenceServers,
  removeHome,
  removeLeftovers,
  ROOT,
  startServe,
} from "./bench_harness.ts";
import { directClient } from "./bench_proxy.ts";

const argv = process.argv.slice(2);
const env: Record<string, string> = { CODEMODE_RUNTIME: "podman" };
let binary: string | undefined;
let python = "";
let rounds = 10;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--binary") binary = argv[++i];
  else if (argv[i] === "--rounds") rounds = Number(argv[++i]);
  else if (argv[i] === "--python") python = argv[++i];
  else if (argv[i] === "--env") {
    const [name, ...value] = argv[++i].split("=");
    env[name] = value.join("=");
  }
}
const BLOCK = 50;
const SLOW_MS = 2;

const SETUP = `
import gc, json, time
ev = mcp_everything
python_gcs = []
gc.callbacks.append(lambda phase, info: phase == "start" and python_gcs.append(time.time_ns() / 1e6))
for i in range(1000):
    await ev.echo(message="warm")
${python}
`;
const TIMED = `
calls = []
for i in range(${BLOCK}):
    t = time.time_ns()
    await ev.echo(message=str(i))
    calls.append([t / 1e6, time.time_ns() / 1e6])
print(json.dumps(calls))
`;

interface ServerMarks {
  reads: number[];
  writes: number[];
  gcs: [number, number][];
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const first = (xs: number[], after: number) => xs.find((x) => x >= after);

const dir = mkdtempSync(join(tmpdir(), "codemode-tail-probe-"));
const marksFile = join(dir, "server.json");
const home = fakeHome((h) => {
  const servers = referenceServers(h) as Record<string, { args: string[]; env?: Record<string, string> }>;
  const preload = join(ROOT, "scripts/tail_probe_server.cjs");
  servers.everything = { ...servers.everything, args: ["--require", preload, ...servers.everything.args] };
  servers.everything.env = { TAIL_PROBE_MARKS: marksFile };
  return servers;
});
const direct = await directClient();
const served = await startServe({ home, env, command: binary ? [binary] : undefined });
try {
  await served.runtimeSelected();
  await catalogIndexed(home, 3);
  await served.run(SETUP);
  const calls: [number, number][] = [];
  const straight: number[] = [];
  for (let round = 0; round < rounds; round++) {
    calls.push(...JSON.parse((await served.run(TIMED)).text) as [number, number][]);
    for (let i = 0; i < BLOCK; i++) {
      const start = performance.now();
      await direct.callTool({ name: "echo", arguments: { message: String(i) } });
      straight.push(performance.now() - start);
    }
  }
  const pythonGcs = JSON.parse((await served.run("print(json.dumps(python_gcs))")).text) as number[];
  await served.close();
  const server = JSON.parse(readFileSync(marksFile, "utf8")) as ServerMarks;
  // Each call split where the server read its request and wrote its answer.
  const split = calls.map(([start, end]) => {
    const read = first(server.reads, start);
    const wrote = read === undefined ? undefined : first(server.writes, read);
    const stages = read === undefined || wrote === undefined || wrote > end
      ? undefined
      : { toServer: read - start, server: wrote - read, back: end - wrote };
    const overlaps = (t: number) => t >= start - 1 && t <= end;
    return {
      ms: end - start,
      stages,
      serverGc: server.gcs.some(([t]) => overlaps(t)),
      pythonGc: pythonGcs.some(overlaps),
    };
  });
  const proxied = split.map((c) => c.ms);
  const timed = split.filter((c) => c.stages);
  const names = ["toServer", "server", "back"] as const;
  const median = Object.fromEntries(names.map((n) => [n, percentile(timed.map((c) => c.stages![n]), 0.5)]));
  const slow = timed.filter((c) => c.ms > SLOW_MS);
  const load = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
  const round3 = (x: number) => Math.round(x * 1000) / 1000;
  console.log(JSON.stringify({
    serve: binary ?? "source",
    env,
    load1: Number(load),
    calls: proxied.length,
    ratio: round3(sum(proxied) / sum(straight)),
    medianMs: { proxied: round3(percentile(proxied, 0.5)), direct: round3(percentile(straight, 0.5)) },
    slowShare: {
      proxied: round3(sum(proxied.filter((x) => x > SLOW_MS)) / sum(proxied)),
      direct: round3(sum(straight.filter((x) => x > SLOW_MS)) / sum(straight)),
    },
    stageMedianMs: Object.fromEntries(names.map((n) => [n, round3(median[n])])),
    slow: {
      count: slow.length,
      // How much longer than its median each part took, summed over the slow calls.
      excessMsByStage: Object.fromEntries(
        names.map((n) => [n, round3(sum(slow.map((c) => c.stages![n] - median[n])))]),
      ),
      mostlyIn: Object.fromEntries(names.map((n) => [
        n,
        slow.filter((c) => names.every((m) => c.stages![n] - median[n] >= c.stages![m] - median[m])).length,
      ])),
      withServerGc: slow.filter((c) => c.serverGc).length,
      withPythonGc: slow.filter((c) => c.pythonGc).length,
    },
    fastWithServerGc: timed.filter((c) => c.ms <= SLOW_MS && c.serverGc).length,
    pythonGcs: pythonGcs.length,
  }));
} finally {
  await served.close().catch(() => {});
  await direct.close();
  await removeLeftovers();
  removeHome(home);
  rmSync(dir, { recursive: true, force: true });
}
