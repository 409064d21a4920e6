/**
 * Section "hostile" (issue 24): what a hostile upstream server costs everyone else, before and after the
 * fix, in the same run. "Before" is codemode at the commit the fix starts from (`BEFORE_COMMIT`, checked
 * out with `git archive` into a temporary folder that borrows this checkout's node_modules), "after" is
 * this checkout. Each build serves over HTTP (Pyodide runtime, so no container start is timed) with the
 * hostile test server (tests/testdata/servers/hostile_server.ts) beside server-everything:
 * - ping p95 and a second session's warm `print(1)` while one session calls a tool whose outputSchema
 *   backtracks (`^(a+)+$` on 26 characters: seconds of CPU before, a worker's deadline after), against the
 *   same figures with no hostile call;
 * - serve RSS and first-search time with 20,000 tools (10 servers of 2,000) and with one 5 MB description;
 * - index build time for 20,000 synthetic tools in-process: built at once (before) and in slices (after).
 * @module
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  DENO,
  fakeHome,
  percentile,
  removeHome,
  ROOT,
  type Row,
  row,
  rssMiB,
  type SectionResult,
  sleep,
  sourceCommand,
} from "./bench_harness.ts";
import { startHttpServe } from "./bench_load.ts";
import { syntheticCatalog } from "./synthetic_catalog.ts";
import { toolDoc } from "../core/catalog/docs.ts";
import { ToolIndex } from "../core/catalog/index.ts";

/** The commit this work starts from: the "before" build. */
const BEFORE_COMMIT = "57c706b";
const HOSTILE = join(ROOT, "tests/testdata/servers/hostile_server.ts");

const hostile = (flags: string[]) => ({
  command: DENO,
  args: ["run", "-A", "--quiet", "--config", join(ROOT, "deno.json"), HOSTILE, ...flags],
});

/** The "before" build: the base commit's tree in a temporary folder, with this checkout's node_modules. */
function beforeBuild(): string[] {
  const dir = mkdtempSync(join(tmpdir(), "codemode-bench-before-"));
  execFileSync("bash", ["-c", `git -C '${ROOT}' archive ${BEFORE_COMMIT} | tar -x -C '${dir}'`]);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return [DENO, "run", "-A", "--quiet", join(dir, "cli.ts")];
}

interface Session {
  client: Client;
  run(code: string): Promise<string>;
  end(): Promise<void>;
}

async function session(url: string): Promise<Session> {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: "codemode-bench-hostile", version: "1" });
  await client.connect(transport);
  return {
    client,
    async run(code) {
      const r = await client.callTool({ name: "run_python", arguments: { code, timeout: 120 } }, {
        timeout: 300_000,
      });
      return (r.content as { text: string }[])[0]?.text ?? "";
    },
    async end() {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
  };
}

/** Pings (one at a time, 25 ms apart) and warm runs of `bystander` while `during` runs; p95 of each. */
async function responsiveness(bystander: Session, during: Promise<unknown>) {
  const pings: number[] = [];
  const runs: number[] = [];
  let done = false;
  void during.finally(() => (done = true));
  const pinger = (async () => {
    while (!done) {
      const started = performance.now();
      await bystander.client.ping({ timeout: 300_000 });
      pings.push(performance.now() - started);
      await sleep(25);
    }
  })();
  const runner = (async () => {
    while (!done) {
      const started = performance.now();
      await bystander.run("print(1)");
      runs.push(performance.now() - started);
      await sleep(100);
    }
  })();
  await during.catch(() => {});
  await Promise.all([pinger, runner]);
  return { ping: percentile(pings, 0.95), run: percentile(runs, 0.95), pings: pings.length };
}

async function measureBuild(label: string, codemode: string[], rows: Row[], base?: Record<string, number>) {
  const figures: Record<string, number> = {};
  // 1. Responsiveness during a backtracking outputSchema, against the same with nothing hostile.
  {
    const home = fakeHome(() => ({ hostile: hostile(["--redos"]) }));
    const serve = await startHttpServe(
      home,
      { CODEMODE_RUNTIME: "pyodide", CODEMODE_TIMEOUT: "120" },
      codemode,
    );
    try {
      const [attacker, bystander] = [await session(serve.url), await session(serve.url)];
      await attacker.run("await mcp_hostile.good_add(a=1, b=2)");
      await bystander.run("print(0)");
      const idle = await responsiveness(bystander, sleep(3000));
      const busy = await responsiveness(
        bystander,
        attacker.run("try:\n    await mcp_hostile.redos_match(n=26)\nexcept Exception as e:\n    print(e)"),
      );
      figures.idlePing = idle.ping;
      figures.idleRun = idle.run;
      figures.busyPing = busy.ping;
      figures.busyRun = busy.run;
      await attacker.end();
      await bystander.end();
    } finally {
      await serve.stop();
      removeHome(home);
    }
  }
  // 2. Serve memory and first search with a large catalog, and with one 5 MB description. The first
  // search that finds every server's tools waits for their listings and the index: the catalog's cost.
  // Every server's tools are alike: a query naming the server ("many7 echoes a message") finds its own.
  for (
    const [key, servers] of [
      [
        "tools",
        Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`many${i}`, hostile(["--tools=2000"])])),
      ],
      ["bigdoc", { big: hostile(["--big-description=5"]) }],
    ] as const
  ) {
    const home = fakeHome(() => servers);
    const serve = await startHttpServe(home, { CODEMODE_RUNTIME: "pyodide" }, codemode);
    try {
      const before = rssMiB(serve.pid) ?? 0;
      const client = await session(serve.url);
      await client.run("1");
      const names = JSON.stringify(Object.keys(servers));
      const started = performance.now();
      await client.run(
        `from mcp import runtime\nimport asyncio\n` +
          `async def found(name):\n` +
          `    hits = await runtime.search_tool_docs(name + " echoes a message", limit=3)\n` +
          `    return any(h["server"] == name for h in hits)\n` +
          `for _ in range(1200):\n` +
          `    if all([await found(name) for name in ${names}]):\n` +
          `        break\n    await asyncio.sleep(0.1)`,
      );
      figures[`${key}Search`] = performance.now() - started;
      const typo = performance.now();
      await client.run(`from mcp import runtime\nawait runtime.search_tool_docs("raed fiel tol", limit=5)`);
      figures[`${key}Typo`] = performance.now() - typo;
      await sleep(1000);
      figures[`${key}Rss`] = (rssMiB(serve.pid) ?? 0) - before;
      await client.end();
    } finally {
      await serve.stop();
      removeHome(home);
    }
  }
  const cmp = (metric: string, key: string, unit: string, note?: string) =>
    rows.push(row({
      section: "hostile",
      metric: `${metric} (${label})`,
      value: figures[key],
      unit,
      ...(base ? { baseline: { label: "before", value: base[key] } } : {}),
      ...(note ? { note } : {}),
    }));
  if (!base) {
    rows.push(row({
      section: "hostile",
      metric: "ping p95 while another session's tool result backtracks (before)",
      value: figures.busyPing,
      unit: "ms",
      baseline: { label: "ping p95 with nothing hostile", value: figures.idlePing },
    }));
    rows.push(row({
      section: "hostile",
      metric: "warm run p95 of another session meanwhile (before)",
      value: figures.busyRun,
      unit: "ms",
      baseline: { label: "warm run p95 with nothing hostile", value: figures.idleRun },
    }));
  } else {
    rows.push(row({
      section: "hostile",
      metric: "ping p95 while another session's tool result backtracks (after)",
      value: figures.busyPing,
      unit: "ms",
      baseline: { label: "ping p95 with nothing hostile", value: figures.idlePing },
      goal: { on: "value", op: "<", limit: 100 },
    }));
    rows.push(row({
      section: "hostile",
      metric: "warm run p95 of another session meanwhile (after)",
      value: figures.busyRun,
      unit: "ms",
      baseline: { label: "warm run p95 with nothing hostile", value: figures.idleRun },
    }));
    cmp("ping p95 during the hostile call, after vs before", "busyPing", "ms");
  }
  cmp(
    "20,000 tools (10 servers of 2,000): from the first search to all found (starts, listings, index)",
    "toolsSearch",
    "ms",
  );
  cmp("20,000 tools: a run with a misspelt search, warm", "toolsTypo", "ms");
  cmp("serve RSS growth with 20,000 tools", "toolsRss", "MiB");
  cmp("one 5 MB description: from the first search to the server's tools found", "bigdocSearch", "ms");
  cmp("one 5 MB description: a run with a misspelt search, warm", "bigdocTypo", "ms");
  cmp("serve RSS growth with one 5 MB description", "bigdocRss", "MiB");
  return figures;
}

/** Index build for 20,000 synthetic tools: at once, and in slices (with the longest slice). */
async function indexBuild(rows: Row[]): Promise<void> {
  const docs = syntheticCatalog(20_000).flatMap((s) => s.tools.map((t) => toolDoc(s.server, t)));
  let started = performance.now();
  new ToolIndex(docs);
  const atOnce = performance.now() - started;
  let longest = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    longest = Math.max(longest, performance.now() - last);
    last = performance.now();
  }, 1);
  started = performance.now();
  await ToolIndex.build(docs);
  const sliced = performance.now() - started;
  clearInterval(ticker);
  rows.push(row({
    section: "hostile",
    metric: "index build for 20,000 synthetic tools, in slices",
    value: sliced,
    unit: "ms",
    baseline: { label: "built at once (before: the event loop held throughout)", value: atOnce },
    note: `longest hold of the event loop while slicing: ${Math.round(longest)} ms`,
  }));
}

/** Runs the section. */
export async function benchHostile(): Promise<SectionResult> {
  const rows: Row[] = [];
  await indexBuild(rows);
  const before = await measureBuild("before", beforeBuild(), rows);
  await measureBuild("after", sourceCommand(), rows, before);
  return {
    name: "hostile",
    rows,
    notes: [
      `before: codemode at ${BEFORE_COMMIT}; after: this checkout; both from source on the Pyodide runtime`,
      "a hostile call: redos_match(n=26) (outputSchema pattern ^(a+)+$); pings one at a time, 25 ms apart",
    ],
  };
}
