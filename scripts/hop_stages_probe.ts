/**
 * Issue 32, the hop study: where one sandbox->host->sandbox hop (`runtime.list_servers()`, no
 * upstream) spends its time, on both sides, on one clock (wall clock in µs: Python's time.time_ns() in
 * the sandbox, performance.timeOrigin + performance.now() here; the container shares the host's clock).
 * The host side is marked by wrapping the socket's 'data' emit, the rpc handler and the socket write; the
 * sandbox side by wrapping Channel.send, the loop's reader callback and rpc._deliver from sandbox code.
 *   hop_stages_probe.ts [--calls N]
 * @module
 */
import { EventEmitter } from "node:events";
import { Socket } from "node:net";
import { Writable } from "node:stream";
import process from "node:process";
import { readdirSync, readFileSync } from "node:fs";
import { type CpuProfile, cpuProfile } from "./cpu_profile.ts";
import { Policy } from "../core/config/policy.ts";
import { sandboxApi } from "../core/host_api/api.ts";
import { toolResultForPython } from "../core/host_api/tool_result.ts";
import { SessionManager } from "../core/sandbox/session_manager.ts";
import { UpstreamPool } from "../core/upstream/pool.ts";
import { podman } from "../plugins/runtime/podman.ts";
import { bootstrapCommand, bootstrapFrame } from "../sandbox/source.ts";

const argv = process.argv.slice(2);
const at = argv.indexOf("--calls");
const calls = at >= 0 ? Number(argv[at + 1]) : 500;
const origin = performance.timeOrigin;
const now = () => Math.round((origin + performance.now()) * 1000); // µs, wall clock

let recording = false;
const host: Record<string, number[]> = { data: [], rpcIn: [], rpcOut: [], writeIn: [], writeOut: [] };
const emit = EventEmitter.prototype.emit;
EventEmitter.prototype.emit = function (this: EventEmitter, event: string | symbol, ...args: unknown[]) {
  if (recording && event === "data") host.data.push(now());
  return emit.call(this, event, ...args);
} as typeof emit;
for (const proto of [Writable.prototype, Socket.prototype]) wrapWrite(proto);
function wrapWrite(proto: Writable) {
  const write = proto.write;
  proto.write = function (this: Writable, chunk: unknown, ...rest: unknown[]) {
    const mark = recording && typeof chunk === "string" && chunk.startsWith('{"type":"rpc_result"');
    if (mark) host.writeIn.push(now());
    // deno-lint-ignore no-explicit-any
    const result = (write as any).call(this, chunk, ...rest);
    if (mark) host.writeOut.push(now());
    return result;
  } as typeof write;
}

const pool = new UpstreamPool([], {});
const api = sandboxApi(pool, { search: () => [], docs: () => [] }, toolResultForPython, new Policy());
const rpc: typeof api = async (method, params, context) => {
  if (recording) host.rpcIn.push(now());
  const value = await api(method, params, context);
  if (recording) host.rpcOut.push(now());
  return value;
};
const runtime = podman();
const sessions = new SessionManager({
  runtime: () => Promise.resolve(runtime),
  image: process.env.CODEMODE_IMAGE ?? "codemode-sandbox:latest",
  limits: { memory: "512m", pids: 64 },
  command: bootstrapCommand(),
  bootstrap: () => bootstrapFrame({ max_output: 1 << 20, servers: [] }),
  rpc,
  maxOutput: 1 << 20,
  idleTimeout: 600,
});

async function run(code: string): Promise<string> {
  const result = await sessions.run("probe", code, { timeout: 600 });
  if (result.status !== "ok") throw new Error(`probe run failed: ${result.error}`);
  return result.stdout;
}

const PIN = process.env.PIN_SANDBOX
  ? `import os; os.sched_setaffinity(0, {${process.env.PIN_SANDBOX}})\n`
  : "";
export const SANDBOX = PIN + `
import gc, json, time
from mcp import runtime
from codemode_runtime import channel as cm, rpc as rm
ch = [o for o in gc.get_objects() if isinstance(o, cm.Channel)][0]
marks = {"call": [], "sendIn": [], "encoded": [], "written": [], "wake": [], "deliver": [], "settled": [], "back": []}
rec = [False]
ns = time.time_ns
enc = cm.encode
def encode(frame):
    data = enc(frame)
    if rec[0]: marks["encoded"].append(ns())
    return data
cm.encode = encode
send = cm.Channel.send
def timed_send(self, frame):
    if rec[0]: marks["sendIn"].append(ns())
    send(self, frame)
    if rec[0]: marks["written"].append(ns())
cm.Channel.send = timed_send
pump = ch._pump_in_loop
def timed_pump():
    if rec[0]: marks["wake"].append(ns())
    pump()
loop = ch._loop
loop.remove_reader(ch._read_fd); loop.add_reader(ch._read_fd, timed_pump)
deliver = rm._deliver
def timed_deliver(lp, fut, frame):
    if rec[0]: marks["deliver"].append(ns())
    deliver(lp, fut, frame)
    if rec[0]: marks["settled"].append(ns())
rm._deliver = timed_deliver
# the kernel's RpcClient sent through Channel.send bound at start: route it through the timed one
for o in gc.get_objects():
    if isinstance(o, rm.RpcClient):
        o._send = ch.send
for i in range(300):
    await runtime.list_servers()
rec[0] = True
cpu = time.process_time()
for i in range(${calls}):
    marks["call"].append(ns())
    await runtime.list_servers()
    marks["back"].append(ns())
rec[0] = False
cpu = (time.process_time() - cpu) / ${calls} * 1e6
print(json.dumps({**{k: [x // 1000 for x in v] for k, v in marks.items()}, "cpu": [cpu]}))
`;

/** CPU ticks (10 ms) by thread name of this process. */
const threadTicks = () => {
  const out: Record<string, number> = {};
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${process.pid}/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
      out[name] = (out[name] ?? 0) + Number(f[11]) + Number(f[12]);
    } catch { /* a thread that ended */ }
  }
  return out;
};
/** Top self times (ms) of a CPU profile, by function and file. */
function selfTimes(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self: Record<string, number> = {};
  for (let i = 0; i < profile.samples.length; i++) {
    const f = byId.get(profile.samples[i])!.callFrame;
    const key = `${f.functionName || "(anon)"} ${f.url.split("/").slice(-2).join("/")}`;
    self[key] = (self[key] ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000;
  }
  return Object.fromEntries(
    Object.entries(self).sort((a, b) => b[1] - a[1]).slice(0, 40).map(([k, v]) => [k, Math.round(v)]),
  );
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
try {
  await run("print(1)");
  recording = true;
  const cpuBefore = process.cpuUsage();
  const ticksBefore = threadTicks();
  let out = "";
  let profile: CpuProfile | undefined;
  if (process.env.PROFILE) {
    profile = await cpuProfile(process.env.PROFILE, 100, async () => out = await run(SANDBOX));
  } else out = await run(SANDBOX);
  const sandbox = JSON.parse(out) as Record<string, number[]>;
  recording = false;
  const cpuUsed = process.cpuUsage(cpuBefore);
  const ticksAfter = threadTicks();
  const byThread = Object.fromEntries(
    Object.entries(ticksAfter).map(([k, v]) => [k, Math.round((v - (ticksBefore[k] ?? 0)) * 10000 / calls)]),
  );
  const sandboxCpu = sandbox.cpu[0];
  delete sandbox.cpu;
  const n = sandbox.call.length;
  const counts = Object.fromEntries(
    [...Object.entries(sandbox), ...Object.entries(host)].map(([k, v]) => [k, v.length]),
  );
  // host marks include the warm-up calls: take the last n of each
  const h = Object.fromEntries(Object.entries(host).map(([k, v]) => [k, v.slice(-n)]));
  // the 'data' event each call arrived in: the last one at or before its handler started
  h.data = h.rpcIn.map((t) => host.data.filter((d) => d <= t).at(-1)!);
  const totals = sandbox.call.map((t, i) => sandbox.back[i] - t);
  const cut = [...totals].sort((a, b) => a - b)[Math.floor(n * 0.75)];
  // process.env.SLOW: the stages of the slowest quarter of calls only (where the mean's excess is)
  const keep = (i: number) => !process.env.SLOW || totals[i] >= cut;
  const stage = (from: number[], to: number[]) =>
    median(from.map((t, i) => to[i] - t).filter((_, i) => keep(i)));
  const table = {
    "sandbox: call() to send (rpc frame built)": stage(sandbox.call, sandbox.sendIn),
    "sandbox: encode": stage(sandbox.sendIn, sandbox.encoded),
    "sandbox: write syscall": stage(sandbox.encoded, sandbox.written),
    "transit out: written -> host 'data' event": stage(sandbox.written, h.data),
    "host: 'data' -> rpc handler (split, parse, check, dispatch)": stage(h.data, h.rpcIn),
    "host: list_servers": stage(h.rpcIn, h.rpcOut),
    "host: handler done -> socket.write (await, encode)": stage(h.rpcOut, h.writeIn),
    "host: socket.write": stage(h.writeIn, h.writeOut),
    "transit back: host write -> sandbox loop's reader callback": stage(h.writeOut, sandbox.wake),
    "sandbox: read, split, decode -> _deliver": stage(sandbox.wake, sandbox.deliver),
    "sandbox: settle future": stage(sandbox.deliver, sandbox.settled),
    "sandbox: settled -> await returns (loop, result_of)": stage(sandbox.settled, sandbox.back),
    "TOTAL per call (median)": stage(sandbox.call, sandbox.back),
    "CPU per call: sandbox (Python, whole process)": Math.round(sandboxCpu),
    "CPU per call: host (whole process, run frames included)": Math.round(
      (cpuUsed.user + cpuUsed.system) / n,
    ),
    "TOTAL per call (mean)": Math.round(sandbox.call.reduce((a, t, i) => a + sandbox.back[i] - t, 0) / n),
    "total, sandbox written -> reader callback (host + both transits)": stage(sandbox.written, sandbox.wake),
  };
  if (profile) console.log(JSON.stringify(selfTimes(profile), null, 1));
  console.log(
    JSON.stringify(
      {
        pinSandbox: process.env.PIN_SANDBOX ?? null,
        runtime: "Bun" in globalThis ? "bun" : "deno",
        calls: n,
        counts,
        hostCpuUsPerCallByThread: byThread,
        us: table,
      },
      null,
      1,
    ),
  );
} finally {
  await sessions.closeAll();
  await pool.close();
}
process.exit(0);
