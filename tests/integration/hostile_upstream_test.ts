/**
 * A hostile upstream server configured beside honest ones (tests/testdata/servers/hostile_server.ts, on
 * the SDK's low-level Server): a backtracking outputSchema, a schema nested 250 levels, a 20 MB
 * description and a flood of random words, terminal escapes in names, descriptions, errors and stderr,
 * a leaked secret on stderr, tools/list_changed notices by the thousand, colliding aliases. Each attempt
 * runs through a real `codemode serve --http` on podman and on Pyodide while a second session pings and
 * runs code: the event loop stays responsive, every honest tool and server keeps working, search keeps
 * answering, memory stays within its bound. Then the CLI under a pseudo-terminal (`script -qfc`) shows
 * the hostile server without letting one escape sequence through, and the debug log holds no secret.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import { podman } from "../../plugins/runtime/podman.ts";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { fakeHome, ROOT, SERVER_SECRET } from "./_serve.ts";
import { connectHttp, type HttpClient, type HttpServe, startHttpServe } from "./_serve_http.ts";

const DENO = join(ROOT, "node_modules/.bin/deno");
const HOSTILE = join(ROOT, "tests/testdata/servers/hostile_server.ts");
const HOSTILE_SECRET = `hostile-secret-${crypto.randomUUID()}`;
/**
 * p95 of pings while an attempt runs. Generous for a loaded 2-core CI machine (the benchmark reports the
 * real figure), and still far below what the attempts cost before (10-14 s stalls).
 */
const PING_P95_MS = 2000;
/** A second session's `print(1)` during an attempt. */
const BYSTANDER_MS = 5000;
/** Serve RSS growth allowed for a catalog with a 20 MB description and 2,000 tools of random words. */
const MEMORY_GROWTH_MB = 500;

const hostile = (flags: string[], env: Record<string, string> = {}) => ({
  command: DENO,
  args: ["run", "-A", "--quiet", "--config", join(ROOT, "deno.json"), HOSTILE, ...flags],
  env,
});

/** The MCPs config: the honest reference servers, the hostile one, a vocabulary flood, one that fails. */
function hostileHome(): string {
  return fakeHome({
    hostile: hostile(
      ["--redos", "--escapes", "--deep=250", "--collide", "--bad-shape", "--print-env=HOSTILE_TOKEN"],
      { HOSTILE_TOKEN: HOSTILE_SECRET },
    ),
    flood: hostile(["--big-description=20", "--tools=2000", "--random-words=40"]),
    broken: hostile(["--fail-start", "--print-env=HOSTILE_TOKEN"], { HOSTILE_TOKEN: HOSTILE_SECRET }),
  });
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

function p95(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))] ?? 0;
}

/**
 * Pings `bystander` one at a time, 25 ms apart, until `stop()` says so and at least `least` were answered
 * (an attempt over before three pings came back, on a loaded machine, still gets a p95 of three); the
 * latencies in ms.
 */
async function pinging(bystander: HttpClient, stop: () => boolean, least = 0): Promise<number[]> {
  const pings: number[] = [];
  while (!stop() || pings.length < least) {
    const started = performance.now();
    await (bystander.client as Client).ping({ timeout: 60_000 });
    pings.push(performance.now() - started);
    await new Promise((r) => setTimeout(r, 25));
  }
  return pings;
}

/**
 * Runs `attempt` while the bystander pings the serve and runs `print(1)` once; fails when the pings' p95
 * passes its bound (PING_P95_MS, or four times the p95 of a second of pings just before, on a machine so
 * loaded that even idle pings are slow) or the run takes longer than BYSTANDER_MS.
 */
async function whileResponsive<T>(bystander: HttpClient, attempt: () => Promise<T>): Promise<T> {
  const baselineEnd = Date.now() + 1000;
  const bound = Math.max(PING_P95_MS, 4 * p95(await pinging(bystander, () => Date.now() > baselineEnd)));
  let done = false;
  const pings = pinging(bystander, () => done, 3);
  const runner = (async () => {
    await new Promise((r) => setTimeout(r, 300));
    const started = performance.now();
    const r = await bystander.run("print(1)", 30);
    return { ms: performance.now() - started, text: r.text, isError: r.isError };
  })();
  try {
    const result = await attempt();
    const run = await runner;
    done = true;
    const latencies = await pings;
    assert.equal(run.isError, false, run.text);
    assert.ok(run.ms < BYSTANDER_MS, `the other session's run took ${Math.round(run.ms)} ms`);
    const worst = p95(latencies);
    assert.ok(
      worst < bound,
      `ping p95 ${Math.round(worst)} ms (bound ${Math.round(bound)}) over ${latencies.length}`,
    );
    return result;
  } finally {
    done = true;
    await pings.catch(() => {});
  }
}

interface Ctx {
  serve: HttpServe;
  attacker: HttpClient;
  bystander: HttpClient;
  home: string;
}

const runtimes = [
  ["podman", (await podman().detect()).available && await podman().imageExists(TEST_IMAGE)],
  ["pyodide", (await pyodide().detect()).available],
] as const;

for (const [runtime, usable] of runtimes) {
  if (!usable) console.warn(`IGNORED hostile upstream on ${runtime}: runtime or image missing`);
  let ctx: Promise<Ctx> | undefined;
  const setUp = () =>
    ctx ??= (async () => {
      const home = hostileHome();
      const serve = await startHttpServe(home, {
        CODEMODE_RUNTIME: runtime,
        CODEMODE_LOG_LEVEL: "debug",
        CODEMODE_LOG_FILE: join(home, "codemode.log"),
        CODEMODE_TIMEOUT: "30",
      });
      const [attacker, bystander] = [await connectHttp(serve.url), await connectHttp(serve.url)];
      // Both sandboxes up before the attempts: a sandbox's start is no part of what is timed.
      for (const client of [attacker, bystander]) {
        const warm = await client.run("1", 60);
        assert.equal(warm.isError, false, warm.text);
      }
      // Every server listed before the attempts: parsing the flood's one 21 MB message is a single pause
      // on the event loop (bounded by the 64 MiB message cap, docs/security.md), not an attempt's doing.
      const listed = await attacker.run(
        "from mcp import runtime\nlen(await runtime.query_tool_docs('flood'))",
        120,
      );
      assert.equal(listed.value, "2000", listed.text);
      return { serve, attacker, bystander, home };
    })();
  const test = (name: string, fn: (ctx: Ctx) => Promise<void>) =>
    Deno.test({
      name: `${runtime}: ${name}`,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => await fn(await setUp()),
    });

  test("a backtracking outputSchema fails its own call in time; pings, the other session and the server's honest tools go on", async ({ attacker, bystander }) => {
    const r = await whileResponsive(bystander, () =>
      attacker.run(
        `try:
    await mcp_hostile.redos_match(n=40)
    outcome = "passed"
except Exception as e:
    outcome = f"{type(e).__name__}: {e}"
(outcome, await mcp_hostile.good_add(a=1, b=2), await mcp_everything.echo(message="still"))`,
        30,
      ));
    assert.equal(r.isError, false, r.text);
    assert.match(String(r.value), /outputSchema/);
    assert.match(String(r.value), /\{'sum': 3\}, 'Echo: still'\)$/);
  });

  test("a schema nested 250 levels and a malformed tool are left out; the server's other tools, help, docs and search work", async ({ attacker, bystander }) => {
    const r = await whileResponsive(bystander, () =>
      attacker.run(
        `from mcp import runtime
tools = dir(mcp_hostile)
doc = mcp_hostile.good_echo.__doc__
full = await runtime.query_tool_docs("hostile", detail="full")
hits = await runtime.search_tool_docs("echoes a message", limit=5, detail="full")
("deep_schema" in tools, "bad_shape" in tools, await mcp_hostile.good_echo(message="ok"),
 "Echoes a message" in doc, len(full) > 3, [h["tool"] for h in hits if "skipped" not in h][:1])`,
        30,
      ));
    assert.equal(r.isError, false, r.text);
    assert.match(String(r.value), /^\(False, False, 'ok', True, True, \['(good_echo|echo)'\]\)$/);
  });

  test("a 20 MB description and 2,000 tools of random words: search answers in time, summaries are bounded, memory stays bounded", async ({ serve, attacker, bystander }) => {
    const r = await whileResponsive(bystander, () =>
      attacker.run(
        `from mcp import runtime
import time
started = time.monotonic()
typo = await runtime.search_tool_docs("raed fiel", limit=5)
plain = await runtime.search_tool_docs("sum of two numbers", limit=3)
summaries = await runtime.query_tool_docs("flood")
(round(time.monotonic() - started, 3), plain[0]["tool"], len(summaries), max(len(s["description"]) for s in summaries),
 "big_doc" in [s["tool"] for s in summaries])`,
        60,
      ));
    assert.equal(r.isError, false, r.text);
    const [seconds, tool, count, longest, big] = String(r.value).replace(/[()' ]/g, "").split(",");
    assert.ok(Number(seconds) < 10, `searches took ${seconds} s`);
    assert.equal(tool, "get-sum");
    assert.equal(Number(count), 2000);
    assert.ok(Number(longest) <= 1000, `a summary carried ${longest} characters`);
    assert.equal(big, "False");
    const grown = rssMb(serve.pid);
    assert.ok(grown < 200 + MEMORY_GROWTH_MB, `the serve holds ${Math.round(grown)} MiB`);
  });

  test("tools/list_changed: a new tool becomes searchable and marked new; a flood of notices costs no responsiveness", async ({ attacker, bystander }) => {
    const r = await whileResponsive(bystander, () =>
      attacker.run(
        `from mcp import runtime
import asyncio
name = await mcp_hostile.add_tool()
await mcp_hostile.spam_list_changed(count=2000)
hit = None
for _ in range(60):
    hits = await runtime.search_tool_docs(name.replace("_", " "), limit=5)
    hit = next((h for h in hits if h["tool"] == name), None)
    if hit:
        break
    await asyncio.sleep(0.5)
(name, bool(hit), bool(hit and hit.get("addedAt")), await getattr(mcp_hostile, name)())`,
        60,
      ));
    assert.equal(r.isError, false, r.text);
    assert.match(String(r.value), /^\('late_0', True, True, 'called late_0'\)$/);
  });

  test("colliding aliases resolve alike in the sandbox and on the host, and import * exports only importable aliases", async ({ attacker }) => {
    const r = await attacker.run(
      `from mcp import runtime
from mcp.servers.hostile import *
(await get_file(), await runtime.call_tool("hostile", "get.file", {}), "__hidden" in dir(), "good_echo" in dir())`,
      30,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(r.value, "('called get-file', 'called get.file', False, True)");
  });

  test("the serve is still whole, and its debug log holds no configured secret", async ({ serve, attacker, bystander, home }) => {
    try {
      const r = await attacker.run("await mcp_everything.echo(message='after all')", 30);
      assert.equal(r.value, "'Echo: after all'");
      const log = readFileSync(join(home, "codemode.log"), "utf8");
      assert.match(log, /"level":"debug"/);
      assert.match(log, /upstream stderr/);
      for (const secret of [HOSTILE_SECRET, SERVER_SECRET]) {
        assert.ok(!log.includes(secret), `a secret is in the debug log`);
      }
    } finally {
      await attacker.end().catch(() => {});
      await bystander.end().catch(() => {});
      await serve.stop();
    }
  });
}

/** Runs `codemode <args>` under a pseudo-terminal and returns what the terminal received. */
function onTerminal(home: string, args: string[]): Promise<string> {
  const command = [DENO, "run", "-A", "--quiet", join(ROOT, "cli.ts"), ...args]
    .map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  return new Promise((resolve) => {
    execFile("script", ["-qfec", command, "/dev/null"], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        TERM: "xterm-256color",
        CODEMODE_STATE_DIR: join(home, "state"),
        CODEMODE_RUNTIME: "pyodide",
      },
      maxBuffer: 64 * 1024 * 1024,
      timeout: 120_000,
    }, (_error, stdout) => resolve(String(stdout)));
  });
}

/** codemode's own colours, and the cursor moves of its progress bar (cli-progress): nothing else may pass. */
const OWN_SEQUENCES =
  // deno-lint-ignore no-control-regex
  /\u001b\[(?:0|1|2|22|31|32|33|36|39)m|\u001b[78]|\u001b\[\?(?:25|7)[lh]|\u001b\[[12]G|\u001b\[[02]K/g;
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

Deno.test({
  name:
    "no escape sequence from a server reaches the terminal: tools, search, servers, stubs and doctor under a pty",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = hostileHome();
    const shown: Record<string, string> = {};
    for (
      const args of [
        ["tools", "hostile"],
        ["search", "evil reads files"],
        ["servers"],
        ["stubs", "hostile"],
        ["doctor", "--quick"],
      ]
    ) {
      shown[args.join(" ")] = await onTerminal(home, args);
    }
    // doctor without --quick starts every server: the broken one's stderr tail is in its report.
    shown["doctor"] = await onTerminal(home, ["doctor"]);
    for (const [command, text] of Object.entries(shown)) {
      for (const raw of ["\x1b]52", "\x1b]0;", "\x1b[2J", "\x1b[8m", "\x1b]8;", "\u009b", "\u009d"]) {
        assert.ok(!text.includes(raw), `codemode ${command} let ${JSON.stringify(raw)} through`);
      }
      const foreign = text.replace(OWN_SEQUENCES, "").match(CONTROL);
      assert.equal(
        foreign,
        null,
        `codemode ${command} let ${JSON.stringify(foreign?.[0])} through: ${
          JSON.stringify(text.slice(0, 3000))
        }`,
      );
    }
    assert.match(shown["tools hostile"], /good_echo/);
    assert.match(
      shown["tools hostile"],
      /\\u001b\]52;c;aGFja2Vk\\u0007/,
      "the description is shown, escaped",
    );
    assert.match(shown["tools hostile"], /deep_schema: its inputSchema is nested more than 64 levels deep/);
    assert.match(shown["search evil reads files"], /evil_doc/);
    assert.match(shown["servers"], /left out/);
    assert.match(shown["stubs hostile"], /def good_echo\(/, "the honest tool's stub is printed");
    assert.match(shown["doctor"], /broken/);
    assert.match(shown["doctor"], /\\u001b\]0;pwned/, "the failing server's stderr is shown, escaped");
    assert.ok(!shown["doctor"].includes(HOSTILE_SECRET), "the failing server's secret is in doctor's report");
  },
});
