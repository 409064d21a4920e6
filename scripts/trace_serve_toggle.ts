/**
 * Issue 31: what tracing adds to a tool call in a real serve, each serve measured both ways so the
 * spread between serve processes (±20 µs of main-thread CPU per call at rest) drops out. Serves from
 * source on podman with server-everything (trace_serve_entry.ts, from this checkout or from each of
 * `--trees`, an A/B of builds), taking turns run by run; each round every serve runs `--gathers` runs of
 * 100 gathered echo calls with tracing off, then turns tracing on (SIGUSR1: a live OTLP/HTTP receiver in
 * this process, or with `--down` a port nothing listens on) and runs as many again, then turns it off.
 * Prints per serve the main-thread CPU added per call (schedstat) and the traced gathers' p50 against the
 * untraced ones', per round and their median.
 *
 *   deno run -A scripts/trace_serve_toggle.ts [--rounds 6] [--gathers 8] [--prints 0] [--down] [--trees DIR,DIR]
 *     --prints N  print(1) runs of every serve before each gather (the bench section: 5)
 *     --trees  each DIR, or DIR:K=V+K=V for a serve of that build with more environment; DIR:never for
 *              one never traced, DIR:start for one traced from its start (neither is toggled)
 * @module
 */
import process from "node:process";
import { percentile, ROOT, sleep } from "./bench_harness.ts";
import { CALLS, collector, flag, GATHER, option, TraceServes } from "./_trace_serves.ts";

const rounds = Number(option("rounds", "6"));
const gathers = Number(option("gathers", "8"));
const trees = option("trees", ROOT).split(",");
const down = flag("down");
/** print(1) runs of every serve before each gather (the bench section makes 5), not measured. */
const prints = Number(option("prints", "0"));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const r1 = (x: number) => Math.round(x * 10) / 10;

const { receiver, endpoint } = await collector(down);
const set = new TraceServes();
/** Serves not toggled (`DIR:never`, `DIR:start`): a baseline for the others. */
const never: boolean[] = [];
const toggle = () => set.serves.forEach((served, i) => never[i] || process.kill(served.pid, "SIGUSR1"));
/** Per serve, per round: main-thread µs per call untraced and traced, and traced p50 / untraced p50. */
const offUs = trees.map(() => [] as number[]);
const onUs = trees.map(() => [] as number[]);
const added = trees.map(() => [] as number[]);
const ratios = trees.map(() => [] as number[]);
try {
  for (const spec of trees) {
    // DIR, or DIR:K=V+K=V for a serve with more environment (a variant of the same build); `never`: never
    // traced; `start`: traced from its start, never toggled.
    const [tree, extra] = spec.split(":");
    const more = Object.fromEntries((extra ? extra.split("+") : []).map((pair) => pair.split("=")));
    never.push(extra === "never" || extra === "start");
    if (extra === "start") Object.assign(more, { CODEMODE_OTLP_ENDPOINT: endpoint });
    delete more.never;
    delete more.start;
    const served = await set.start(tree, { TRACE_URL: endpoint, ...more });
    // Warm both ways.
    for (let n = 0; n < 5; n++) await served.run(GATHER);
    if (!never.at(-1)) process.kill(served.pid, "SIGUSR1");
    await sleep(1_500);
    for (let n = 0; n < 5; n++) await served.run(GATHER);
    if (!never.at(-1)) process.kill(served.pid, "SIGUSR1");
    await sleep(500);
  }
  for (let round = 0; round < rounds; round++) {
    // Starting tracing loads the export worker (its own CPU for a while): it is given 3 s first.
    const off = await set.gathers(gathers, prints);
    toggle();
    await sleep(3_000);
    const on = await set.gathers(gathers, prints);
    toggle();
    await sleep(3_000);
    for (const i of set.serves.keys()) {
      offUs[i].push(off.cpu[i] * 1000 / (gathers * CALLS));
      onUs[i].push(on.cpu[i] * 1000 / (gathers * CALLS));
      added[i].push((on.cpu[i] - off.cpu[i]) * 1000 / (gathers * CALLS));
      ratios[i].push(percentile(on.walls[i], 0.5) / percentile(off.walls[i], 0.5));
    }
  }
} finally {
  await set.close(receiver);
}
console.log(JSON.stringify(
  {
    rounds,
    gathers,
    collector: down ? "down" : "live",
    spans: receiver.spans.length,
    serves: Object.fromEntries(trees.map((tree, i) => [`${i} ${tree}`, {
      mainUsPerCall: { off: r1(median(offUs[i])), on: r1(median(onUs[i])) },
      addedMainUsPerCall: r1(median(added[i])),
      ratio: Math.round(100 * median(ratios[i])) / 100,
      rounds: added[i].map((a, r) => `${r1(a)} µs ${ratios[i][r].toFixed(2)}x`),
    }])),
  },
  null,
  1,
));
process.exit(0);
