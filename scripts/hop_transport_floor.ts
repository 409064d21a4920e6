/**
 * Issue 32, the hop study: the floor of one host<->Python round trip over the kind of socketpair
 * the sandbox's direct channel is (a child's fd 3), with nothing of codemode's on either side. Runs under
 * Deno, Bun and Node alike; prints RTT, time inside socket.write and the host's CPU per round trip.
 * @module
 */
import process from "node:process";
import { readdirSync } from "node:fs";
import { spawn } from "node:child_process";
import type { Duplex } from "node:stream";
const N = 5000, SKIP = 500;
// A blocking Python echoer on fd 3: no asyncio, no frames, the transport alone.
const ECHO =
  "import socket\ns = socket.socket(fileno=3)\nwhile True:\n    d = s.recv(65536)\n    if not d: break\n    s.sendall(d)\n";
const child = spawn("python3", ["-c", ECHO], { stdio: ["pipe", "pipe", "inherit", "pipe"] });
const sock = child.stdio[3] as unknown as Duplex;
const line = '{"type":"rpc_result","id":1,"ok":true,"value":[{"name":"everything"}]}\n';
let n = 0, inWrite = 0, t0 = 0;
let cpu0 = process.cpuUsage();
await new Promise<void>((resolve) => {
  sock.on("data", () => {
    if (++n === N) return resolve();
    if (n === SKIP) {
      t0 = performance.now();
      inWrite = 0;
      cpu0 = process.cpuUsage();
    }
    const a = performance.now();
    sock.write(line);
    inWrite += performance.now() - a;
  });
  sock.write(line);
});
const per = (performance.now() - t0) / (N - SKIP) * 1000;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({
  runtime: "Bun" in globalThis ? "bun" : ("Deno" in globalThis ? "deno" : "node"),
  rttUs: Math.round(per),
  inWriteUs: Math.round(inWrite / (N - SKIP) * 1000),
  hostCpuUsPerRtt: Math.round((cpu.user + cpu.system) / (N - SKIP)),
  threads: readdirSync(`/proc/${process.pid}/task`).length,
}));
child.kill();
process.exit(0);
