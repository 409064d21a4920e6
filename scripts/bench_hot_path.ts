/**
 * Section "hotpath" (issue 32): where the microseconds of one proxied `echo` go, per stage, on the
 * source build's runtime (Deno) and the binary's (Bun): the sandbox's CPU (and its own frame work),
 * the host's CPU split by V8's profiler into stages, the upstream server's CPU, the sandbox↔host hop
 * alone, and the wall time against an SDK client calling the same server, all in one run. Each runtime
 * is measured on the lean path and on the SDK client's (`request` with the CallToolResult schema, the
 * path legacy-era calls take without the lean one), so the table shows what the lean path saves.
 * The host runs in scripts/hot_path_probe.ts; its CPU profiles are kept as .cpuprofile files (open one
 * in Chrome's DevTools or speedscope for the flame graph). Last, where the slow calls (over 2 ms) of a real
 * serve spend their time, for the source build and the binary (scripts/tail_probe.ts).
 * @module
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BINARY,
  DENO,
  IMAGE,
  removeLeftovers,
  ROOT,
  type Row,
  row,
  type SectionResult,
  works,
} from "./bench_harness.ts";

const PROBE = join(ROOT, "scripts/hot_path_probe.ts");
const TAIL_PROBE = join(ROOT, "scripts/tail_probe.ts");
const BUN = join(ROOT, "node_modules/.bin/bun");

interface Probe {
  runtime: string;
  path: "lean" | "sdk";
  calls: number;
  rounds: number;
  median: Record<string, number>;
  sandboxFrameUs: { encode: number; decodeAndUnwrap: number };
  stages?: Record<string, number>;
}

function probe(runtime: "deno" | "bun", sdk: boolean, profile: string): Promise<Probe> {
  const args = [PROBE, "--calls", "500", "--rounds", "5", "--profile", profile, ...(sdk ? ["--sdk"] : [])];
  const [command, argv] = runtime === "deno" ? [DENO, ["run", "-A", "--quiet", ...args]] : [BUN, args];
  return lastJsonLine(command, argv, `hot path probe (${runtime})`);
}

/** What scripts/tail_probe.ts prints (the parts of it the rows use). */
interface Tail {
  load1: number;
  ratio: number;
  medianMs: { proxied: number; direct: number };
  slowShare: { proxied: number; direct: number };
  slow: {
    count: number;
    excessMsByStage: Record<"toServer" | "server" | "back", number>;
    withServerGc: number;
    withPythonGc: number;
  };
}

/** The slow calls of 500 sequential echoes through a serve (from source, or `binary`), split by part. */
function tail(binary?: string): Promise<Tail> {
  const argv = ["run", "-A", "--quiet", TAIL_PROBE, ...(binary ? ["--binary", binary] : [])];
  return lastJsonLine(DENO, argv, "tail probe");
}

/** Runs a probe and parses the JSON object on the last line of its stdout. */
function lastJsonLine<T>(command: string, argv: string[], what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(command, argv, { maxBuffer: 16 << 20, timeout: 600_000 }, (error, stdout, stderr) => {
      const line = stdout.trim().split("\n").at(-1) ?? "";
      if (error || !line.startsWith("{")) return reject(new Error(`${what} failed: ${stderr.slice(-800)}`));
      resolve(JSON.parse(line));
    });
  });
}

/** The row of one build's slow calls: their share of the proxied time against the direct client's. */
function tailRow(label: string, t: Tail): Row {
  const ms = t.slow.excessMsByStage;
  return row({
    section: "hotpath",
    metric: `share of 500 sequential echoes' time in calls over 2 ms, ${label}`,
    value: Math.round(t.slowShare.proxied * 100),
    unit: "%",
    baseline: { label: "the direct SDK client's, same run", value: Math.round(t.slowShare.direct * 100) },
    note:
      `${t.slow.count} slow calls; over their medians they spent ${Math.round(ms.toServer)} ms getting to ` +
      `server-everything (sandbox → host → server), ${Math.round(ms.server)} ms in it, ${
        Math.round(ms.back)
      } ms ` +
      `getting back; ${t.slow.withServerGc} overlapped a GC of the server, ${t.slow.withPythonGc} one of ` +
      `Python; total ${t.ratio}x the direct client, medians ${t.medianMs.proxied} against ` +
      `${t.medianMs.direct} ms; 1-minute load ${t.load1}`,
  });
}

/** The rows of one runtime: the lean path per stage, with the SDK path beside it. */
function rowsOf(label: string, lean: Probe, sdk: Probe): Row[] {
  const l = lean.median, s = sdk.median;
  const r = (metric: string, value: number, baseline?: { label: string; value: number }, note?: string) =>
    row({
      section: "hotpath",
      metric: `${metric}, ${label}`,
      value,
      unit: "µs",
      ...(baseline ? { baseline } : {}),
      ...(note ? { note } : {}),
    });
  const split = (p: Probe) =>
    Object.entries(p.stages ?? {}).sort((a, b) => b[1] - a[1]).map(([stage, share]) =>
      `${stage} ${Math.round(share * p.median.hostCpu)}`
    ).join(", ");
  return [
    r("proxied echo, wall per call", l.wall, {
      label: "SDK client → server-everything, same run",
      value: l.directWall,
    }),
    r("proxied echo through the SDK client's request, wall per call", s.wall, {
      label: "SDK client → server-everything, same run",
      value: s.directWall,
    }),
    r(
      "sandbox CPU per call (Python: proxy, frames, asyncio, syscalls)",
      l.sandboxCpu,
      undefined,
      `of which encoding the call ${lean.sandboxFrameUs.encode} µs, decoding and unwrapping the answer ` +
        `${lean.sandboxFrameUs.decodeAndUnwrap} µs (timed in place)`,
    ),
    r("host CPU per call, lean path", l.hostCpu, {
      label: "host CPU per call, SDK client path",
      value: s.hostCpu,
    }, `profile split (µs): ${split(lean)}; SDK path: ${split(sdk)}`),
    r("upstream server CPU per call (server-everything)", l.serverCpu, {
      label: "the same server under the direct SDK client",
      value: l.directServerCpu,
    }),
    r("direct SDK client CPU per call", l.directClientCpu),
    r("sandbox↔host hop alone (list_servers), wall per call", l.hop),
  ];
}

/** Runs the hot path section. */
export async function benchHotPath(): Promise<SectionResult> {
  const result: SectionResult = { name: "hotpath", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const profiles = mkdtempSync(join(tmpdir(), "codemode-hot-path-profiles-"));
  try {
    for (const runtime of ["deno", "bun"] as const) {
      const lean = await probe(runtime, false, join(profiles, `${runtime}-lean.cpuprofile`));
      const sdk = await probe(runtime, true, join(profiles, `${runtime}-sdk.cpuprofile`));
      result.rows.push(
        ...rowsOf(runtime === "deno" ? "Deno (source build)" : "Bun (binary's runtime)", lean, sdk),
      );
    }
    result.rows.push(tailRow("serve from source", await tail()));
    if (existsSync(BINARY)) result.rows.push(tailRow("compiled binary", await tail(BINARY)));
    result.notes.push(
      "The slow-call rows come from scripts/tail_probe.ts (10 blocks of 50 echoes alternating with the " +
        "direct client, each call split where server-everything read the request and wrote the answer). " +
        "Medians of 5 rounds of 500 calls; CPU from process.cpuUsage() (host), time.process_time() (sandbox) " +
        "and /proc/<pid>/stat (servers, 10 ms ticks). The host's split comes from a V8 CPU profile of one " +
        `more round, sampled every 200 µs; the profiles are in ${profiles}.`,
    );
  } finally {
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
  }
  return result;
}
