/**
 * Issue 31, where a traced tool call's main-thread CPU goes inside a real serve: serves from source on
 * podman with server-everything, tracing off and on (a live OTLP/HTTP receiver, or with `--down` a port
 * nothing listens on), taking turns run by run over `--gathers` runs of 100 gathered echo calls. Prints
 * each serve's main-thread CPU per call (schedstat) and wall p50 per gather; with `--profile`, each serve
 * also profiles itself (trace_serve_entry.ts) and the self time per call (µs) by function of the first
 * two serves is compared, largest difference first.
 *
 *   deno run -A scripts/trace_serve_profile.ts [--gathers 40] [--prints 0] [--down] [--profile] [--out DIR]
 *     --prints N             print(1) runs of every serve before each gather (the bench section: 5)
 *     [--kinds off,on,...]   the serves: `off`, or `on`; `on:<extra env as K=V+K=V>` for a variant (with
 *                            `|` between serves instead of `,`, a value may hold commas: V8 flags)
 * @module
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { percentile, ROOT, sleep } from "./bench_harness.ts";
import type { CpuProfile } from "./cpu_profile.ts";
import { CALLS, collector, flag, GATHER, option, TraceServes } from "./_trace_serves.ts";

const gathers = Number(option("gathers", "40"));
const out = option("out", mkdtempSync(join(tmpdir(), "trace-serve-profile-")));
const down = flag("down");
const profiling = flag("profile");
/** print(1) runs each serve makes between its gathers (the bench section makes 5), not measured. */
const prints = Number(option("prints", "0"));

const { receiver, endpoint } = await collector(down);
const kindsText = option("kinds", "off,on");
const kinds = kindsText.split(kindsText.includes("|") ? "|" : ",").map((name) => {
  const [mode, extra] = name.split(":");
  const env: Record<string, string> = mode === "on" ? { CODEMODE_OTLP_ENDPOINT: endpoint } : {};
  for (const pair of extra ? extra.split("+") : []) {
    const at = pair.indexOf("=");
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return { name, env };
});
const set = new TraceServes();
let main = kinds.map(() => 0);
let wall = kinds.map(() => [] as number[]);
try {
  for (const [i, kind] of kinds.entries()) {
    const served = await set.start(ROOT, { TRACE_PROFILE: join(out, `serve-${i}.cpuprofile`), ...kind.env });
    for (let n = 0; n < 10; n++) await served.run(GATHER);
  }
  if (profiling) { for (const served of set.serves) process.kill(served.pid, "SIGUSR2"); }
  await sleep(500);
  ({ cpu: main, walls: wall } = await set.gathers(gathers, prints));
  if (profiling) { for (const served of set.serves) process.kill(served.pid, "SIGUSR2"); }
  await sleep(profiling ? 3_000 : 0);
} finally {
  await set.close(receiver);
}

/** Self time (µs) by function, over a profile's samples, with a label for the file or package. */
function selfTime(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const times = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const { url, functionName } = byId.get(profile.samples[i])!.callFrame;
    if (functionName === "(idle)") continue;
    const pkg = /node_modules\/(?:\.deno\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(url);
    const file = pkg ? `${pkg[1]}/${pkg[2].split("/").pop()}` : url.split("/").slice(-2).join("/");
    const key = `${file} ${functionName || "(anonymous)"}`;
    times.set(key, (times.get(key) ?? 0) + profile.timeDeltas[i]);
  }
  return times;
}

const calls = gathers * CALLS;
const r1 = (x: number) => Math.round(x * 10) / 10;
const report: Record<string, unknown> = {
  gathers,
  collector: down ? "down" : "live",
  spans: receiver.spans.length,
  serves: Object.fromEntries(kinds.map((k, i) => [`${i} ${k.name}`, {
    mainUsPerCall: r1(main[i] * 1000 / calls),
    addedMainUsPerCall: r1((main[i] - main[0]) * 1000 / calls),
    wallP50: r1(percentile(wall[i], 0.5)),
    ratio: Math.round(100 * percentile(wall[i], 0.5) / percentile(wall[0], 0.5)) / 100,
  }])),
};
if (profiling) {
  const profiles = [0, 1].map((i) =>
    selfTime(JSON.parse(readFileSync(join(out, `serve-${i}.cpuprofile`), "utf8")) as CpuProfile)
  );
  const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  const keys = new Set([...profiles[0].keys(), ...profiles[1].keys()]);
  const diff = [...keys].map((key) => ({
    key,
    off: (profiles[0].get(key) ?? 0) / calls,
    on: (profiles[1].get(key) ?? 0) / calls,
  })).map((d) => ({ ...d, added: d.on - d.off })).sort((a, b) => b.added - a.added);
  const line = (d: typeof diff[number]) => `${r1(d.added)} (${r1(d.off)} -> ${r1(d.on)}) ${d.key}`;
  Object.assign(report, {
    out,
    profileSelfUsPerCall: [0, 1].map((i) => r1(total(profiles[i]) / calls)),
    addedTop: diff.slice(0, 45).map(line),
    removedTop: diff.slice(-12).map(line),
  });
}
console.log(JSON.stringify(report, null, 1));
process.exit(0);
