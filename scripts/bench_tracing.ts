/**
 * Section "tracing" (issue 31): what traces cost a run. Four serves from source on podman, alike but for
 * tracing: off, off again (a control: the spread between two alike serves), on with a live OTLP/HTTP
 * receiver (in this process, decoding what the real exporter sends), and on with the collector down (a
 * port nothing listens on). They take turns, run by run, so load on the machine falls on all alike.
 * Figures: warm `print(1)` and 100 gathered echo calls (server-everything), p50 per serve; the baseline is
 * tracing off in the same run.
 *
 * With CODEMODE_BENCH_BEFORE=<a checkout of the code before tracing, with node_modules>, a fourth serve
 * runs from there and tracing off is compared with it too (target ≤ 1.05x). With
 * CODEMODE_BENCH_TRACING_OTHER=<a checkout of another tracing build, with node_modules>, two more serves
 * run that build traced (live receiver, collector down), compared with the same tracing-off serve: an A/B
 * of two ways of tracing in one run.
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startOtlpReceiver } from "../tests/integration/_otlp_receiver.ts";
import {
  DENO,
  fakeHome,
  IMAGE,
  percentile,
  referenceServers,
  removeHome,
  removeLeftovers,
  row,
  type SectionResult,
  type Served,
  sourceCommand,
  startServe,
  works,
} from "./bench_harness.ts";

/** Per serve: print(1) runs, and runs of 100 gathered echo calls (one every prints/gathers prints). */
export const counts = { prints: 120, gathers: 24 };

const GATHER = `import asyncio
r = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(100)])
len(r)`;

/** CPU time (user and system, ms) the process `pid` has used so far, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The CPU time of a process's main thread alone (its event loop), in ms, from schedstat's nanoseconds. */
function mainThreadCpuMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
}

/** `fn`, tried up to three times (a runtime detection that timed out is tried again by the next run). */
async function retried<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

/** Runs the tracing section. */
export async function benchTracing(): Promise<SectionResult> {
  const result: SectionResult = { name: "tracing", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const receiver = await startOtlpReceiver();
  const dead = await startOtlpReceiver();
  const deadUrl = dead.url;
  await dead.close();
  const before = process.env.CODEMODE_BENCH_BEFORE;
  const other = process.env.CODEMODE_BENCH_TRACING_OTHER;
  const kinds: { name: string; env: Record<string, string>; command?: string[] }[] = [
    { name: "off", env: {} },
    // A control: a second serve alike the first, whose ratio to it is the spread between two serve
    // processes in one run (their main-thread CPU per call differs by tens of µs at rest).
    { name: "off, a second serve", env: {} },
    { name: "on, live receiver", env: { CODEMODE_OTLP_ENDPOINT: receiver.url } },
    { name: "on, collector down", env: { CODEMODE_OTLP_ENDPOINT: deadUrl } },
    ...before
      ? [{ name: "before tracing", env: {}, command: [DENO, "run", "-A", "--quiet", join(before, "cli.ts")] }]
      : [],
    ...other
      ? [
        { name: "on, live receiver, other build", env: { CODEMODE_OTLP_ENDPOINT: receiver.url } },
        { name: "on, collector down, other build", env: { CODEMODE_OTLP_ENDPOINT: deadUrl } },
      ].map((kind) => ({ ...kind, command: [DENO, "run", "-A", "--quiet", join(other, "cli.ts")] }))
      : [],
  ];
  const at = (name: string) => kinds.findIndex((kind) => kind.name === name);
  const homes: string[] = [];
  const serves: Served[] = [];
  const times = kinds.map(() => ({ print: [] as number[], gather: [] as number[] }));
  // The serve's own CPU time during its runs: where tracing's work is done, and steadier than wall time
  // on a busy machine (the sandbox, the upstream server and the client are other processes).
  const cpu = kinds.map(() => ({ print: 0, gather: 0 }));
  // The same for the main thread alone (spans are exported by a worker thread, which runs mostly between
  // runs), and each serve's whole CPU over all its runs and the pauses between them, exports included.
  const mainCpu = kinds.map(() => ({ print: 0, gather: 0 }));
  const wholeCpu = kinds.map(() => 0);
  try {
    // One after another, each warm before the next starts: detecting podman on a busy machine is slow.
    for (const kind of kinds) {
      const home = fakeHome((h) => ({ everything: referenceServers(h).everything }));
      homes.push(home);
      const served = await startServe({
        home,
        command: kind.command ?? sourceCommand(),
        env: { CODEMODE_RUNTIME: "podman", ...kind.env },
      });
      serves.push(served);
      await served.runtimeSelected(120_000).catch(() => {});
      // Warm: the sandbox started, the server started and listed, a first gather done.
      await retried(() => served.run("print(1)"));
      await served.run(GATHER);
    }
    const timed = async (i: number, key: "print" | "gather") => {
      const served = serves[i];
      const [start, cpuStart, mainStart] = [
        performance.now(),
        cpuMs(served.pid),
        mainThreadCpuMs(served.pid),
      ];
      await served.run(key === "print" ? "print(1)" : GATHER);
      times[i][key].push(performance.now() - start);
      cpu[i][key] += cpuMs(served.pid) - cpuStart;
      mainCpu[i][key] += mainThreadCpuMs(served.pid) - mainStart;
    };
    const wholeStart = serves.map((served) => cpuMs(served.pid));
    // Run by run in turn, so a burst of load on the machine falls on every serve alike.
    for (let n = 0; n < counts.prints; n++) {
      for (const i of serves.keys()) await timed(i, "print");
      if (n % (counts.prints / counts.gathers) !== 0) continue;
      for (const i of serves.keys()) await timed(i, "gather");
    }
    // A pause as long as the export delay, so spans still queued are exported and counted.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    for (const i of serves.keys()) wholeCpu[i] = cpuMs(serves[i].pid) - wholeStart[i];
  } finally {
    await Promise.all(serves.map((s) => s.close().catch(() => {})));
    await receiver.close();
    for (const home of homes) removeHome(home);
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
  }
  const p50 = (xs: number[]) => percentile(xs, 0.5);
  const p95 = (xs: number[]) => `p95 ${percentile(xs, 0.95).toFixed(1)} ms`;
  const off = times[0];
  const old = before ? times[at("before tracing")] : undefined;
  // Every traced serve, by its index and name.
  const traced = kinds.flatMap((kind, i) => kind.name.startsWith("on,") ? [[i, kind.name] as const] : []);
  const control = times[at("off, a second serve")];
  for (const [metric, key] of [["warm print(1)", "print"], ["100 gathered echo calls", "gather"]] as const) {
    const offBaseline = { label: "tracing off, p50", value: p50(off[key]) };
    const within = (limit: number) => ({ on: "ratio" as const, op: "≤" as const, limit });
    result.rows.push(row({
      section: "tracing",
      metric: `${metric}, tracing off, a second serve, p50`,
      value: p50(control[key]),
      unit: "ms",
      baseline: offBaseline,
      note: `the spread between two alike serves; ${p95(control[key])}`,
    }));
    if (old) {
      result.rows.push(row({
        section: "tracing",
        metric: `${metric}, tracing off, p50`,
        value: p50(off[key]),
        unit: "ms",
        baseline: { label: "before tracing, p50", value: p50(old[key]) },
        goal: within(1.05),
        note: `${p95(off[key])}; before: ${p95(old[key])}`,
      }));
    }
    for (const [i, kind] of traced) {
      const measured = times[i];
      result.rows.push(row({
        section: "tracing",
        metric: `${metric}, tracing ${kind}, p50`,
        value: p50(measured[key]),
        unit: "ms",
        baseline: offBaseline,
        goal: within(1.2),
        note: p95(measured[key]),
      }));
    }
  }
  for (
    const [metric, key, runs] of [
      ["serve CPU per warm print(1)", "print", counts.prints],
      ["serve CPU per run of 100 gathered echo calls", "gather", counts.gathers],
    ] as const
  ) {
    const offCpu = cpu[0][key] / runs;
    if (before) {
      result.rows.push(row({
        section: "tracing",
        metric: `${metric}, tracing off`,
        value: offCpu,
        unit: "ms",
        baseline: { label: "before tracing", value: cpu[at("before tracing")][key] / runs },
        note: `mean over ${runs} runs`,
      }));
    }
    for (const [i, kind] of traced) {
      result.rows.push(row({
        section: "tracing",
        metric: `${metric}, tracing ${kind}`,
        value: cpu[i][key] / runs,
        unit: "ms",
        baseline: { label: "tracing off", value: offCpu },
        note: `mean over ${runs} runs; +${
          ((cpu[i][key] / runs - offCpu) * 1000 / (key === "print" ? 1 : 100)).toFixed(0)
        } µs per ${key === "print" ? "run" : "call"}`,
      }));
    }
  }
  const gatherMain = (i: number) => mainCpu[i].gather / counts.gathers;
  for (const [i, kind] of [[at("off, a second serve"), "off, a second serve"] as const, ...traced]) {
    result.rows.push(row({
      section: "tracing",
      metric: `serve main-thread CPU per run of 100 gathered echo calls, tracing ${kind}`,
      value: gatherMain(i),
      unit: "ms",
      baseline: { label: "tracing off", value: gatherMain(0) },
      note: `mean over ${counts.gathers} runs; +${
        ((gatherMain(i) - gatherMain(0)) * 10).toFixed(0)
      } µs per call`,
    }));
  }
  result.notes.push(
    "each serve's whole CPU (all threads) over all its runs and a 6 s pause after them: " +
      kinds.map((kind, i) => `${kind.name} ${(wholeCpu[i] / 1000).toFixed(2)} s`).join(", "),
  );
  result.notes.push(
    `per serve ${counts.prints} print(1) and ${counts.gathers} runs of 100 gathered server-everything echo ` +
      "calls, the serves taking turns run by run; serve from source on podman",
    `the live receiver got ${receiver.spans.length} spans in ${receiver.requests} export requests`,
    ...other ? [`"other build" ran from ${other}`] : [],
    before ? `"before tracing" ran from ${before}` : "tracing off against the code before tracing: set " +
      "CODEMODE_BENCH_BEFORE to a checkout of it (with node_modules) to measure it in the same run",
  );
  return result;
}
