/**
 * The upstream pool against servers that misbehave on purpose (tests/testdata/servers/faulty_server.ts):
 * crashes, hangs, floods, garbage on stdout, oversized and invalid results, failed starts, stray children.
 */
import assert from "node:assert/strict";
import process from "node:process";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { alive, textOf } from "./_harness.ts";
import { setLogLevel, setLogSink } from "../../core/observe/log.ts";
import { toolResultForPython } from "../../core/host_api/tool_result.ts";
import {
  UnknownServerError,
  UpstreamCallError,
  UpstreamCancelledError,
  UpstreamClosedError,
  UpstreamExitedError,
  UpstreamPool,
  type UpstreamPoolOptions,
  UpstreamResultTooLargeError,
  UpstreamStartError,
  UpstreamTimeoutError,
} from "../../core/upstream/pool.ts";

const source = { plugin: "test", file: "test", key: "test" };
const SERVER = new URL("../testdata/servers/faulty_server.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

function faulty(name: string, flags: string[] = [], extra: Partial<ServerSpec> = {}): ServerSpec {
  return {
    name,
    transport: "stdio",
    command: Deno.execPath(),
    args: ["run", "-A", "--config", CONFIG, SERVER, ...flags],
    source,
    ...extra,
  };
}

async function withPool(
  specs: ServerSpec[],
  fn: (pool: UpstreamPool) => Promise<void>,
  options?: UpstreamPoolOptions,
): Promise<void> {
  const pool = new UpstreamPool(specs, options);
  try {
    await fn(pool);
  } finally {
    await pool.close();
  }
}

/** Pids of live processes whose command line contains `marker`. */
function pidsWith(marker: string): number[] {
  const ps = new Deno.Command("ps", { args: ["-eo", "pid=,args="] }).outputSync();
  return new TextDecoder().decode(ps.stdout).split("\n")
    .filter((line) => line.includes(marker) && !line.includes("ps -eo"))
    .map((line) => Number(line.trim().split(/\s+/)[0]))
    .filter(alive);
}

async function captureLogs(fn: (lines: string[]) => Promise<void>): Promise<void> {
  const lines: string[] = [];
  setLogLevel("debug");
  setLogSink((line) => lines.push(line));
  try {
    await fn(lines);
  } finally {
    setLogLevel("warn");
    setLogSink((line) => process.stderr.write(line + "\n"));
  }
}

Deno.test("a server that exits mid-call fails that call promptly with its exit code, and the next call restarts it", async () => {
  await withPool([faulty("f")], async (pool) => {
    const before = Number(textOf(await pool.callTool("f", "pid")));
    const bystanders = Array.from(
      { length: 20 },
      () => pool.callTool("f", "slow", { ms: 5000, message: "x" }),
    );
    const started = Date.now();
    await assert.rejects(pool.callTool("f", "crash", { code: 7 }), (error: Error) => {
      assert.ok(error instanceof UpstreamExitedError);
      assert.equal(error.server, "f");
      assert.equal(error.tool, "crash");
      assert.match(error.message, /MCP server "f" exited \(code 7\) during the call to "crash"/);
      return true;
    });
    for (const call of bystanders) await assert.rejects(call, /exited \(code 7\) during the call to "slow"/);
    assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
    assert.equal(pool.status("f").state, "failed");

    const after = Number(textOf(await pool.callTool("f", "pid")));
    assert.notEqual(after, before);
    assert.equal(pool.status("f").restarts, 1);
    assert.equal(pool.status("f").state, "ready");
  });
});

Deno.test("a hanging call times out at the server's timeoutMs, is cancelled on the server, and the server stays usable", async () => {
  await withPool([faulty("h", [], { timeoutMs: 300 })], async (pool) => {
    await pool.listTools("h");
    const started = Date.now();
    await assert.rejects(pool.callTool("h", "hang"), (error: Error) => {
      assert.ok(error instanceof UpstreamTimeoutError);
      assert.equal(error.timeoutMs, 300);
      assert.match(error.message, /"hang" on MCP server "h" timed out after 300 ms/);
      return true;
    });
    const took = Date.now() - started;
    assert.ok(took >= 290 && took < 3000, `took ${took} ms`);
    assert.equal(textOf(await pool.callTool("h", "echo", { message: "alive" })), "alive");
    let cancelled = "";
    for (let i = 0; i < 50 && cancelled !== "1"; i++) {
      if (i) await new Promise((resolve) => setTimeout(resolve, 20));
      cancelled = textOf(await pool.callTool("h", "cancellations"));
    }
    assert.equal(cancelled, "1");
    assert.equal(pool.status("h").restarts, 0);
  }, { callTimeoutMs: 60_000 });
});

Deno.test("a per-call timeout overrides the server's, and an aborted signal cancels the call", async () => {
  await withPool([faulty("h", [], { timeoutMs: 60_000 })], async (pool) => {
    await pool.listTools("h");
    await assert.rejects(pool.callTool("h", "hang", {}, { timeoutMs: 100 }), UpstreamTimeoutError);
    const controller = new AbortController();
    const call = pool.callTool("h", "hang", {}, { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(
      call,
      (error: Error) => error instanceof UpstreamCancelledError && /cancelled/.test(error.message),
    );
    // The server handles the cancel notification asynchronously; give it a moment.
    let cancelled = "";
    for (let i = 0; i < 50 && cancelled !== "2"; i++) {
      if (i) await new Promise((resolve) => setTimeout(resolve, 20));
      cancelled = textOf(await pool.callTool("h", "cancellations"));
    }
    assert.equal(cancelled, "2");
  });
});

Deno.test("concurrent first uses share one start", async () => {
  await withPool([faulty("f")], async (pool) => {
    const pids = await Promise.all(Array.from({ length: 20 }, () => pool.callTool("f", "pid").then(textOf)));
    assert.equal(new Set(pids).size, 1);
    assert.equal(pool.status("f").restarts, 0);
  });
});

Deno.test("hundreds of slow calls to one server run concurrently", async () => {
  await withPool([faulty("f")], async (pool) => {
    await pool.listTools("f");
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => pool.callTool("f", "slow", { ms: 300, message: `r${i}` })),
    );
    results.forEach((result, i) => assert.equal(textOf(result), `r${i}`));
    // One after another this would take 90 s.
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  });
});

Deno.test("non-JSON lines on a server's stdout are skipped and logged at debug level", async () => {
  await captureLogs(async (lines) => {
    await withPool([faulty("g", ["--garbage"])], async (pool) => {
      assert.ok((await pool.listTools("g")).length > 10);
      assert.equal(textOf(await pool.callTool("g", "garbage")), "after garbage");
      assert.equal(textOf(await pool.callTool("g", "echo", { message: "clean" })), "clean");
    });
    assert.ok(lines.some((line) => line.includes("stdout noise") && line.includes("this is not JSON")));
  });
});

Deno.test("a server flooding stderr neither stalls nor floods the log", async () => {
  await captureLogs(async (lines) => {
    await withPool([faulty("f")], async (pool) => {
      assert.equal(textOf(await pool.callTool("f", "flood_stderr", { mb: 30 })), "wrote 30 MB");
      assert.equal(textOf(await pool.callTool("f", "echo", { message: "after" })), "after");
    });
    const stderrLines = lines.filter((line) => line.includes('"upstream stderr"'));
    assert.ok(
      stderrLines.length > 0 && stderrLines.length <= 200,
      `${stderrLines.length} stderr lines logged`,
    );
    assert.ok(lines.join("\n").length < 1_000_000);
    assert.ok(lines.some((line) => line.includes("upstream output suppressed")));
  });
});

Deno.test("a 20 MB result comes through; a 70 MB one fails clearly and the server keeps serving", async () => {
  await withPool([faulty("f")], async (pool) => {
    const pid = pool.callTool("f", "pid").then(textOf);
    const big = await pool.callTool("f", "big", { mb: 20 });
    assert.equal(textOf(big).length, 20 * 1024 * 1024);
    await assert.rejects(pool.callTool("f", "big", { mb: 70 }), (error: Error) => {
      assert.ok(error instanceof UpstreamResultTooLargeError);
      assert.match(
        error.message,
        /"f" answered the call to "big" with more data .*70 MiB, over the 64 MiB limit/,
      );
      return true;
    });
    assert.equal(textOf(await pool.callTool("f", "pid")), await pid);
    assert.equal(pool.status("f").restarts, 0);
  });
});

Deno.test("invalid JSON-RPC replies fail their calls, clearly or at the call timeout, and the server stays usable", async () => {
  const kinds = [
    "result_not_object",
    "error_not_object",
    "result_and_error",
    "wrong_version",
    "unknown_id",
    "truncated",
    "content_not_list",
  ];
  await withPool([faulty("j", [], { timeoutMs: 500 })], async (pool) => {
    await pool.listTools("j");
    const outcomes = await Promise.allSettled(
      kinds.map((kind) => pool.callTool("j", "forge_reply", { kind })),
    );
    outcomes.forEach((outcome, i) => {
      assert.equal(outcome.status, "rejected", `${kinds[i]} was taken as a result`);
      const error = (outcome as PromiseRejectedResult).reason;
      assert.ok(error instanceof UpstreamCallError || error instanceof UpstreamTimeoutError, String(error));
    });
    assert.equal(textOf(await pool.callTool("j", "echo", { message: "still here" })), "still here");
    assert.equal(pool.status("j").restarts, 0);
  });
});

Deno.test("a lower maxMessageBytes applies to results", async () => {
  await withPool([faulty("f")], async (pool) => {
    await assert.rejects(pool.callTool("f", "big", { mb: 2 }), UpstreamResultTooLargeError);
    assert.equal(textOf(await pool.callTool("f", "echo", { message: "small" })), "small");
  }, { maxMessageBytes: 1024 * 1024 });
});

Deno.test("content MCP does not define fails the call clearly, and a result too deep for Python is refused", async () => {
  await withPool([faulty("f")], async (pool) => {
    await assert.rejects(pool.callTool("f", "unknown_content"), (error: Error) => {
      assert.ok(error instanceof UpstreamCallError);
      assert.match(
        error.message,
        /MCP server "f" failed the call to "unknown_content": Invalid tools\/call result/,
      );
      assert.ok(!error.message.includes("\n"));
      return true;
    });
    await assert.rejects(
      pool.callTool("f", "no_such_tool"),
      /failed the call to "no_such_tool": .*not found/,
    );
    const deep = await pool.callToolReply("f", "deep", { depth: 3000 });
    assert.throws(() => toolResultForPython(deep, false), /nested more than 500 levels/);
  });
});

Deno.test("listTools() follows pagination cursors and caches the list until a restart", async () => {
  await withPool([faulty("p", ["--tools=7", "--page-size=3"])], async (pool) => {
    const tools = await pool.listTools("p");
    assert.equal(tools.length, 23);
    assert.equal(new Set(tools.map((tool) => tool.name)).size, 23);
    assert.ok(tools.some((tool) => tool.name === "extra_6"));
    assert.equal(textOf(await pool.callTool("p", "pages_served")), "8");
    await pool.listTools("p");
    assert.equal(textOf(await pool.callTool("p", "pages_served")), "8");
    await assert.rejects(pool.callTool("p", "crash"), UpstreamExitedError);
    assert.equal((await pool.listTools("p")).length, 23);
    assert.equal(textOf(await pool.callTool("p", "pages_served")), "8");
  });
});

Deno.test("start failures name the server, the exit code and its stderr", async () => {
  await withPool([faulty("x", ["--exit-at-start=4"]), {
    name: "missing",
    transport: "stdio",
    command: "/nonexistent/codemode-test-server",
    source,
  }], async (pool) => {
    await assert.rejects(pool.listTools("x"), (error: Error) => {
      assert.ok(error instanceof UpstreamStartError);
      assert.match(error.message, /MCP server "x" failed to start: it exited \(code 4\) before it was ready/);
      assert.match(error.message, /faulty_server: exiting at start as asked/);
      return true;
    });
    assert.equal(pool.status("x").state, "failed");
    assert.match(pool.status("x").error!, /code 4/);
    await assert.rejects(pool.callTool("x", "echo"), UpstreamStartError);
    assert.equal(pool.status("x").restarts, 1);
    await assert.rejects(pool.callTool("missing", "echo"), /"missing" failed to start: .*ENOENT/);
  });
});

Deno.test("a server that never answers fails within the start timeout and is killed", async () => {
  const marker = `--marker=silent-${crypto.randomUUID()}`;
  await withPool([faulty("s", ["--silent", marker])], async (pool) => {
    const started = Date.now();
    await assert.rejects(
      pool.listTools("s"),
      /"s" failed to start: it did not finish the MCP handshake within 700 ms/,
    );
    assert.ok(Date.now() - started < 4000);
    assert.deepEqual(pidsWith(marker), []);
  }, { startTimeoutMs: 700 });
});

Deno.test("aborting a call while its server is still starting rejects it at once", async () => {
  await withPool([faulty("s", ["--silent"])], async (pool) => {
    const controller = new AbortController();
    const call = pool.callTool("s", "echo", { message: "x" }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    const started = Date.now();
    await assert.rejects(call, UpstreamCancelledError);
    assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`);
    assert.equal(pool.status("s").state, "starting");
  }, { startTimeoutMs: 30_000 });
});

Deno.test("close() kills a server's whole process tree, and a start in progress", async () => {
  const marker = `--marker=starting-${crypto.randomUUID()}`;
  const pool = new UpstreamPool([faulty("f"), faulty("s", ["--silent", marker])]);
  const server = Number(textOf(await pool.callTool("f", "pid")));
  const child = Number(textOf(await pool.callTool("f", "spawn_child")));
  const starting = assert.rejects(pool.listTools("s"), UpstreamClosedError);
  const deadline = Date.now() + 10_000;
  while (pidsWith(marker).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.ok(alive(server) && alive(child) && pidsWith(marker).length > 0);
  await pool.close();
  await starting;
  assert.ok(!alive(server), "server still running");
  assert.ok(!alive(child), "its child still running");
  assert.deepEqual(pidsWith(marker), []);
});

Deno.test("unknown server names and duplicate specs are refused", async () => {
  await withPool([faulty("f")], async (pool) => {
    await assert.rejects(pool.callTool("nope", "echo"), (error: Error) => {
      return error instanceof UnknownServerError &&
        error.message === 'Unknown MCP server "nope": configured servers are "f"';
    });
    assert.throws(() => pool.status("nope"), UnknownServerError);
    assert.equal(pool.status("f").state, "idle");
  });
  assert.throws(() => new UpstreamPool([faulty("f"), faulty("f")]), TypeError);
});
