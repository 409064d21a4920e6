/**
 * Section "precheck" (issue 29): what the pre-run check adds to a run, and what stubs cost. A serve from
 * source on podman runs programs of 10, 100 and 1,000 lines (a tool call every five lines, in branches
 * that do not run, so the check does all its work and no call is made) with and without
 * `# codemode: nocheck`, alternating, in the same session: the added end-to-end latency is the difference
 * of the medians. The check alone is also timed inside the sandbox (parse excluded, the host's round trip
 * included). Stub generation for 1,000 tools is timed in process against serialising the same tools.
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Tool } from "@modelcontextprotocol/client";
import { serverStub, toolStub } from "../core/catalog/stubs.ts";
import * as bench from "./bench_harness.ts";

/** Runs of each program with and without the check, after `warmUp` of each. */
export const counts = { runs: 40, warmUp: 5, inSandbox: 30, stubRounds: 10 };
const SIZES = [10, 100, 1000];

/** A program of `lines` lines: five-line blocks, each with a tool call the check resolves and no run makes. */
export function program(lines: number): string {
  const out = ["flag = False  # the calls below are checked, never made"];
  for (let k = 0; out.length + 5 <= lines; k++) {
    out.push(
      `v${k} = ${k} * 2`,
      "for i in range(2):",
      `    v${k} += i`,
      "if flag:",
      `    await mcp_everything.get_sum(a=v${k}, b=1)`,
    );
  }
  while (out.length < lines - 1) out.push(`pad${out.length} = ${out.length}`);
  out.push("flag");
  return out.join("\n");
}

/** Runs the precheck section. */
export async function benchPrecheck(): Promise<bench.SectionResult> {
  const result: bench.SectionResult = { name: "precheck", rows: [], notes: [] };
  stubRows(result);
  if (!(await bench.works("podman", ["image", "exists", bench.IMAGE]))) {
    result.skipped = `podman or the image "${bench.IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = bench.fakeHome();
  try {
    const served = await bench.startServe({
      home,
      env: { CODEMODE_RUNTIME: "podman", CODEMODE_LOG_LEVEL: "warn" },
    });
    try {
      for (const lines of SIZES) {
        const checked = program(lines);
        const unchecked = `# codemode: nocheck\n${checked}`;
        for (let i = 0; i < counts.warmUp; i++) {
          await Promise.all([served.run(checked), served.run(unchecked)]);
        }
        const times = { checked: [] as number[], unchecked: [] as number[] };
        for (let i = 0; i < counts.runs; i++) {
          for (const [kind, code] of [["checked", checked], ["unchecked", unchecked]] as const) {
            const started = performance.now();
            await served.run(code);
            times[kind].push(performance.now() - started);
          }
        }
        const p50 = {
          checked: bench.percentile(times.checked, 0.5),
          unchecked: bench.percentile(times.unchecked, 0.5),
        };
        const inside = await checkInSandbox(served, checked);
        result.rows.push(
          bench.row({
            section: "precheck",
            metric: `run_python of ${lines} lines (${Math.floor((lines - 1) / 5)} checked calls), p50`,
            value: p50.checked,
            unit: "ms",
            baseline: { label: "the same program with `# codemode: nocheck`, p50", value: p50.unchecked },
            note: `p95 ${bench.percentile(times.checked, 0.95).toFixed(2)} / ${
              bench.percentile(times.unchecked, 0.95).toFixed(2)
            } ms`,
          }),
          bench.row({
            section: "precheck",
            metric: `added by the check, ${lines} lines (difference of the p50s)`,
            value: p50.checked - p50.unchecked,
            unit: "ms",
            ...(lines === 100 ? { goal: { on: "value" as const, op: "<" as const, limit: 5 } } : {}),
            note: `the check alone in the sandbox: p50 ${
              inside.toFixed(2)
            } ms (its host round trip included)`,
          }),
        );
      }
    } finally {
      await served.close();
    }
    result.notes.push(
      `${counts.runs} runs of each program with and without the check, alternating, after ${counts.warmUp} ` +
        "warm-up runs of each, one warm podman session, serve from source; everything/get_sum calls in `if " +
        "flag:` branches (checked, never made)",
    );
  } finally {
    bench.removeHome(home);
    const left = await bench.removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
  }
  return result;
}

/** The check's own time in the sandbox (median of repeated calls on the parsed program), in ms. */
async function checkInSandbox(
  served: Awaited<ReturnType<typeof bench.startServe>>,
  code: string,
): Promise<number> {
  const { text } = await served.run(`# codemode: nocheck
import ast, json, time
from mcp import _precheck
source = ${JSON.stringify(code)}
tree = ast.parse(source)
times = []
for _ in range(${counts.inSandbox}):
    t = time.perf_counter()
    assert not _precheck.findings(source, tree)
    times.append((time.perf_counter() - t) * 1000)
print(json.dumps(sorted(times)[len(times) // 2]))`);
  return Number(text.trim().split("\n").at(-1));
}

/** Stub generation for 1,000 tools (the reference servers' tools, renamed), against serialising them. */
function stubRows(result: bench.SectionResult): void {
  const base = ["everything", "filesystem", "memory"].flatMap((name) =>
    (JSON.parse(readFileSync(join(bench.ROOT, `tests/testdata/catalogs/${name}.json`), "utf8")) as {
      tools: Tool[];
    })
      .tools
  );
  const tools = Array.from({ length: 1000 }, (_, i) => ({ ...base[i % base.length], name: `tool_${i}` }));
  const time = (fn: () => unknown) => {
    fn();
    const times: number[] = [];
    for (let i = 0; i < counts.stubRounds; i++) {
      const started = performance.now();
      fn();
      times.push(performance.now() - started);
    }
    return bench.percentile(times, 0.5);
  };
  const module = time(() => serverStub("bench", tools));
  const each = time(() => tools.forEach((t) => toolStub(t)));
  const json = time(() => JSON.stringify(tools));
  const size = serverStub("bench", tools).length;
  result.rows.push(
    bench.row({
      section: "precheck",
      metric: "stubs of 1,000 tools, one module (runtime.stubs, codemode stubs), p50",
      value: module,
      unit: "ms",
      baseline: { label: "JSON.stringify of the same tools", value: json },
      note: `${(size / 1024).toFixed(0)} KiB of .pyi`,
    }),
    bench.row({
      section: "precheck",
      metric: "stubs of 1,000 tools one by one (help()), p50 for all",
      value: each,
      unit: "ms",
      baseline: { label: "JSON.stringify of the same tools", value: json },
    }),
  );
}
