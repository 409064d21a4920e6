/**
 * Section "peers" (issue 32): the workloads of the side-by-side comparison with the Python bridge, UTCP
 * code-mode and Monty (issue 32's table: 200 sequential echoes, a megabyte printed back), plus what must
 * not get slower (a warm `print(1)`, 100 gathered calls, 1 MB and 10 MB tool results byte for byte),
 * against a real `codemode serve` (from source, and `dist/codemode` when it is built) on podman.
 *
 * Baselines in the same run: an SDK client calling server-everything directly, and Monty (pydantic's
 * Python interpreter, in this process, its `echo` an async external function calling the same kind of
 * SDK client) when `CODEMODE_BENCH_PEERS` names a folder whose node_modules holds `@pydantic/monty`
 * (`npm install --prefix DIR @pydantic/monty`; it is no dependency of codemode). UTCP code-mode needs
 * isolated-vm 6, which builds only against Node.js 22 or later, and the bridge needs PyPI: their figures
 * are the issue's, from another machine and day, and said so.
 * @module
 */
import type { Client } from "@modelcontextprotocol/client";
import { existsSync } from "node:fs";
import { directClient } from "./bench_proxy.ts";
import { join } from "node:path";
import process from "node:process";
import {
  BINARY,
  catalogIndexed,
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  type Row,
  row,
  type SectionResult,
  startServe,
  works,
} from "./bench_harness.ts";

const ROUNDS = 5;
const SEQUENTIAL = 200;
const MB = 1_000_000;

/** What issue 32 recorded for the peers (2026-11-26, 5 rounds, medians, podman for codemode). */
const RECORDED = {
  perCall: { bridge: 1.1, utcp: 0.95, monty: 0.64, codemode: 1.21 },
  megabyte: { utcp: 102, monty: 65, codemode: 178 },
};

const median = (values: number[]) => percentile(values, 0.5);

const WARM = `
import asyncio, json, time, hashlib
ev = mcp_everything
for i in range(500):
    await ev.echo(message="warm")
await asyncio.gather(*[ev.echo(message="warm") for i in range(100)])
`;
const SEQUENTIAL_CODE = `
t = time.perf_counter()
for i in range(${SEQUENTIAL}):
    await ev.echo(message=str(i))
print(json.dumps((time.perf_counter() - t) * 1000 / ${SEQUENTIAL}))
`;
const GATHERED_CODE = `
t = time.perf_counter()
out = await asyncio.gather(*[ev.echo(message=str(i)) for i in range(100)])
assert out[42] == "Echo: 42", out[42]
print(json.dumps((time.perf_counter() - t) * 1000))
`;
const PRINTED_BACK = `r = await mcp_everything.echo(message="x" * ${MB})\nprint(r)`;
/** A tool result of `size` bytes, timed in the sandbox and compared byte for byte with what was sent. */
const resultOf = (size: number) => `
m = "".join(chr(97 + i % 26) for i in range(${size}))
t = time.perf_counter()
r = await ev.echo(message=m)
ms = (time.perf_counter() - t) * 1000
assert r == "Echo: " + m, ("not byte-exact", len(r))
print(json.dumps(ms))
`;

/** The serve builds measured: from source, the shipped binary, and any binary named for comparison. */
function serveTargets(): { label: string; command?: string[] }[] {
  const targets: { label: string; command?: string[] }[] = [{ label: "from source (Deno)" }];
  if (existsSync(BINARY)) targets.push({ label: "compiled binary (Bun)", command: [BINARY] });
  const other = process.env.CODEMODE_BENCH_OTHER_BINARY;
  if (other && existsSync(other)) targets.push({ label: `other binary ${other}`, command: [other] });
  return targets;
}

interface Measured {
  perCall: number[];
  printedBack: number[];
  printOne: number[];
  gathered: number[];
  oneMb: number[];
  tenMb: number[];
}

async function measureServe(home: string, command: string[] | undefined): Promise<Measured> {
  const served = await startServe({
    home,
    command,
    env: { CODEMODE_RUNTIME: "podman" },
    maxBufferSize: 64 << 20,
  });
  const m: Measured = { perCall: [], printedBack: [], printOne: [], gathered: [], oneMb: [], tenMb: [] };
  try {
    await served.runtimeSelected();
    await catalogIndexed(home, 3);
    await served.run(WARM);
    await served.run(PRINTED_BACK);
    // server-everything reads stdin with the SDK's ReadBuffer, which copies its whole buffer for every chunk:
    // 10 MB take seconds there on a loaded machine, past run_python's default 30 s under load.
    // What the code printed, from structuredContent: the text may carry notes beside it.
    const number = async (code: string) => {
      const { text, structured } = await served.run(code, 300);
      return JSON.parse(String(structured.stdout ?? text).trim()) as number;
    };
    for (let round = 0; round < ROUNDS; round++) {
      m.perCall.push(await number(SEQUENTIAL_CODE));
      const started = performance.now();
      const printed = await served.run(PRINTED_BACK);
      m.printedBack.push(performance.now() - started);
      if (!printed.text.includes("x".repeat(MB))) throw new Error("the megabyte did not come back whole");
      m.gathered.push(await number(GATHERED_CODE));
      m.oneMb.push(await number(resultOf(MB)));
      m.tenMb.push(await number(resultOf(10 * MB)));
    }
    for (let i = 0; i < 30; i++) {
      const started = performance.now();
      await served.run("print(1)");
      m.printOne.push(performance.now() - started);
    }
    return m;
  } finally {
    await served.close();
  }
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

async function measureDirect(
  client: Client,
): Promise<{ perCall: number[]; oneMb: number[]; tenMb: number[] }> {
  const echo = (message: string) => client.callTool({ name: "echo", arguments: { message } });
  const out = { perCall: [] as number[], oneMb: [] as number[], tenMb: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    out.perCall.push(
      await timed(async () => {
        for (let i = 0; i < SEQUENTIAL; i++) await echo(String(i));
      }) / SEQUENTIAL,
    );
    out.oneMb.push(await timed(() => echo("x".repeat(MB))));
    out.tenMb.push(await timed(() => echo("x".repeat(10 * MB))));
  }
  return out;
}

/** Monty's figures for the same two workloads, when it is installed where CODEMODE_BENCH_PEERS says. */
async function measureMonty(
  client: Client,
): Promise<{ perCall: number[]; printedBack: number[] } | undefined> {
  const dir = process.env.CODEMODE_BENCH_PEERS;
  const wrapper = dir && join(dir, "node_modules/@pydantic/monty/wrapper.js");
  if (!wrapper || !existsSync(wrapper)) return undefined;
  const { Monty, runMontyAsync } = await import(wrapper);
  const echo = async ({ message }: { message: string }) => {
    const result = await client.callTool({ name: "echo", arguments: { message } });
    return (result.content as { text: string }[])[0].text;
  };
  const run = async (code: string) => {
    let printed = "";
    await runMontyAsync(new Monty(code), {
      externalFunctions: { echo },
      printCallback: (_stream: string, text: string) => void (printed += text),
    });
    return printed;
  };
  const loop = `for i in range(${SEQUENTIAL}):\n    echo(message=str(i))`;
  await run(loop);
  const out = { perCall: [] as number[], printedBack: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    out.perCall.push(await timed(() => run(loop)) / SEQUENTIAL);
    let printed = "";
    out.printedBack.push(
      await timed(async () => printed = await run(`r = echo(message="x" * ${MB})\nprint(r)`)),
    );
    if (!printed.includes("x".repeat(MB))) throw new Error("Monty did not print the megabyte back");
  }
  return out;
}

const all = (values: number[]) => values.map((v) => v.toFixed(v < 10 ? 3 : 1)).join(", ");

/** Runs the peers section. */
export async function benchPeers(): Promise<SectionResult> {
  const result: SectionResult = { name: "peers", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = fakeHome();
  const client = await directClient(500);
  try {
    const direct = await measureDirect(client);
    const monty = await measureMonty(client);
    const rows: Row[] = [];
    for (const target of serveTargets()) {
      const m = await measureServe(home, target.command);
      const perCall = median(m.perCall);
      const printed = median(m.printedBack);
      rows.push(
        row({
          section: "peers",
          metric: `${SEQUENTIAL} sequential echoes from sandbox code, per call, serve ${target.label}`,
          value: perCall,
          unit: "ms",
          baseline: { label: "SDK client → server-everything, per call", value: median(direct.perCall) },
          goal: { on: "value", op: "≤", limit: RECORDED.perCall.utcp },
          note: `rounds: ${all(m.perCall)} ms; recorded for peers: bridge ${RECORDED.perCall.bridge}, UTCP ` +
            `${RECORDED.perCall.utcp}, Monty ${RECORDED.perCall.monty} ms` +
            (monty ? `; Monty in this run ${median(monty.perCall).toFixed(3)} ms` : ""),
        }),
        row({
          section: "peers",
          metric: `1 MB echoed and printed back (run_python from the client), serve ${target.label}`,
          value: printed,
          unit: "ms",
          ...(monty
            ? { baseline: { label: "Monty, same workload, this run", value: median(monty.printedBack) } }
            : { baseline: { label: "Monty, recorded in issue 32", value: RECORDED.megabyte.monty } }),
          goal: { on: "ratio", op: "≤", limit: 1.5 },
          note: `rounds: ${all(m.printedBack)} ms; one SDK client echo of 1 MB: ${
            median(direct.oneMb).toFixed(1)
          } ms; recorded: UTCP ${RECORDED.megabyte.utcp}, Monty ${RECORDED.megabyte.monty}, codemode ${RECORDED.megabyte.codemode} ms`,
        }),
        row({
          section: "peers",
          metric: `warm run_python print(1), p50 of 30, serve ${target.label}`,
          value: median(m.printOne),
          unit: "ms",
          note: `p95 ${percentile(m.printOne, 0.95).toFixed(2)} ms`,
        }),
        row({
          section: "peers",
          metric: `100 echoes under asyncio.gather, serve ${target.label}`,
          value: median(m.gathered),
          unit: "ms",
          note: `rounds: ${all(m.gathered)} ms`,
        }),
        row({
          section: "peers",
          metric: `1 MB tool result, byte-exact, from sandbox code, serve ${target.label}`,
          value: median(m.oneMb),
          unit: "ms",
          baseline: { label: "SDK client → server-everything, same echo", value: median(direct.oneMb) },
          note: `rounds: ${all(m.oneMb)} ms`,
        }),
        row({
          section: "peers",
          metric: `10 MB tool result, byte-exact, from sandbox code, serve ${target.label}`,
          value: median(m.tenMb),
          unit: "ms",
          baseline: { label: "SDK client → server-everything, same echo", value: median(direct.tenMb) },
          note: `rounds: ${all(m.tenMb)} ms`,
        }),
      );
    }
    result.rows.push(...rows);
    result.notes.push(
      monty
        ? "Monty ran in this process (@pydantic/monty from CODEMODE_BENCH_PEERS), its echo calling an SDK client."
        : "Monty was not measured (set CODEMODE_BENCH_PEERS to a folder with @pydantic/monty installed); its " +
          "recorded figure is the baseline.",
      "UTCP code-mode needs isolated-vm 6 (Node.js 22 or later) and the Python bridge PyPI; neither can " +
        "be installed here, so their figures are the ones issue 32 recorded on 2026-11-26.",
    );
  } finally {
    await client.close();
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    removeHome(home);
  }
  return result;
}
