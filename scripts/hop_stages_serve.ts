/**
 * Issue 32, the hop study: the sandbox-side marks of hop_stages_probe.ts, through a real
 * `codemode serve` (source, or a binary with --binary PATH) driven by the SDK client as the bench does.
 * Host-side stages are not marked here: "written -> reader callback" is the serve's whole share.
 * @module
 */
import process from "node:process";
import { fakeHome, referenceServers, startServe } from "./bench_harness.ts";
import { hopSandboxCode } from "./_hop_sandbox_code.ts";

const argv = process.argv.slice(2);
const at = argv.indexOf("--binary");
// --marks: the serve from source with host-side marks (hop_serve_entry.ts)
const marksFile = argv.includes("--marks") ? `/tmp/hop-marks-${process.pid}.json` : undefined;
const entry = new URL("./hop_serve_entry.ts", import.meta.url).pathname;
const command = at >= 0
  ? [argv[at + 1]]
  : marksFile
  ? [process.execPath, "run", "-A", "--quiet", entry]
  : undefined;
const calls = 1000;
const code = hopSandboxCode(calls);
const home = fakeHome(referenceServers);
const served = await startServe({
  home,
  env: {
    CODEMODE_RUNTIME: "podman",
    ...(marksFile ? { HOP_MARKS: marksFile } : {}),
    ...(process.env.HOP_PROFILE ? { HOP_PROFILE: process.env.HOP_PROFILE } : {}),
    ...(process.env.CODEMODE_SECCOMP ? { CODEMODE_SECCOMP: process.env.CODEMODE_SECCOMP } : {}),
  },
  command,
});
const mean = (v: number[]) => Math.round(v.reduce((a, b) => a + b, 0) / v.length);
const p90 = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length * 0.9)];
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
try {
  await served.runtimeSelected();
  await served.run("print(1)");
  const m = JSON.parse((await served.run(code)).text) as Record<string, number[]>;
  const stage = (a: number[], b: number[]) => median(a.map((t, i) => b[i] - t));
  console.log(JSON.stringify(
    {
      serve: command?.[0] ?? "source",
      us: {
        "sandbox: call() to send": stage(m.call, m.sendIn),
        "sandbox: encode": stage(m.sendIn, m.encoded),
        "sandbox: write syscall": stage(m.encoded, m.written),
        "serve's share: written -> sandbox loop's reader callback": stage(m.written, m.wake),
        "sandbox: read, split, decode -> _deliver": stage(m.wake, m.deliver),
        "sandbox: settle": stage(m.deliver, m.settled),
        "sandbox: settled -> await returns": stage(m.settled, m.back),
        "TOTAL per call (median)": stage(m.call, m.back),
        "TOTAL per call (mean)": mean(m.call.map((t, i) => m.back[i] - t)),
        "TOTAL per call (p90)": p90(m.call.map((t, i) => m.back[i] - t)),
      },
    },
    null,
    1,
  ));
  if (marksFile) {
    await served.close();
    await new Promise((r) => setTimeout(r, 500));
    const h = JSON.parse(await Deno.readTextFile(marksFile)) as Record<string, number[]>;
    const n = m.call.length;
    const last = (v: number[]) => v.slice(-n);
    const [data, writeIn, writeOut] = [last(h.data), last(h.writeIn), last(h.writeOut)];
    console.log(JSON.stringify(
      {
        hostMarks: { data: h.data.length, writeIn: h.writeIn.length, writeOut: h.writeOut.length },
        us: {
          "transit out: written -> serve's 'data' event": stage(m.written, data),
          "serve: 'data' -> socket.write (split, parse, dispatch, answer, encode)": stage(data, writeIn),
          "serve: socket.write": stage(writeIn, writeOut),
          "transit back: serve's write -> sandbox reader callback": stage(writeOut, m.wake),
        },
      },
      null,
      1,
    ));
  }
} finally {
  await served.close();
}
process.exit(0);
