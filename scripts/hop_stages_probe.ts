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
import { UpstreamPool } from "../core/upstream/pool.ts";
import { hopSandboxCode } from "./_hop_sandbox_code.ts";
import { pinSandbox, probeSandbox } from "./_probe_sandbox.ts";

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
const { run, close } = probeSandbox(rpc);
const SANDBOX = pinSandbox() + hopSandboxCode(calls);

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
  await close();
  await pool.close();
}
process.exit(0);
