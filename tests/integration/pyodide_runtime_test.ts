/**
 * The pyodide runtime through the real host session: real Pyodide in a real locked-down deno subprocess,
 * driven by core/sandbox/session.ts exactly like a container. Also measures start-up and round trips.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { installPyodideAssets, type PrepareProgress, pyodide } from "../../plugins/runtime/pyodide.ts";
import { denoArgs, denoEnv, findDeno, memoryBytes } from "../../plugins/runtime/_pyodide_deno.ts";
import { findPyodideAssets, PYODIDE_FILES } from "../../plugins/runtime/_pyodide_files.ts";
import { SandboxSession } from "../../core/sandbox/session.ts";
import type { SandboxStartOptions } from "../../core/contracts/runtime.ts";
import type { RpcHandler } from "../../core/host_api/rpc.ts";
import { bootstrapFrame } from "../../sandbox/source.ts";
import { echoRpc, pyodideStart, sessions } from "./_harness.ts";

/** Shared across runs and test files, so the start-up snapshot is made once. */
const STATE = join(tmpdir(), "codemode-test-pyodide");
const runtime = () => pyodide({ stateDir: STATE });
const start = (name = "codemode-test-pyodide"): SandboxStartOptions => pyodideStart(name);
const test = (name: string, fn: () => Promise<void> | void) =>
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });

test("the deno command line grants read access to the Pyodide files and nothing else", () => {
  const args = denoArgs({
    deno: "/usr/bin/deno",
    program: "/state/pyodide/1/host-abc.mjs",
    readable: ["/nm/pyodide", "/state/pyodide/1"],
    heapBytes: memoryBytes("256m"),
    config: { mode: "serve", assets: "/nm/pyodide/", memoryBytes: 1 },
  });
  assert.deepEqual(args.slice(0, 2), ["/usr/bin/deno", "run"]);
  const flags = args.filter((arg) => arg.startsWith("-"));
  assert.deepEqual(flags.filter((f) => f.startsWith("--allow")), [
    "--allow-read=/nm/pyodide,/state/pyodide/1",
  ]);
  assert.ok(!flags.includes("-A") && !flags.some((f) => /^-[A-Za-z]$/.test(f)), "no short permission flags");
  for (
    const flag of ["--no-prompt", "--no-config", "--no-lock", "--no-remote", "--no-npm", "--cached-only"]
  ) {
    assert.ok(flags.includes(flag), `missing ${flag}`);
  }
  for (const kind of ["write", "net", "env", "run", "ffi", "sys", "import"]) {
    assert.ok(flags.includes(`--deny-${kind}`), `missing --deny-${kind}`);
  }
  assert.ok(flags.includes("--v8-flags=--max-old-space-size=256,--disallow-code-generation-from-strings"));
  assert.equal(args.at(-2), "/state/pyodide/1/host-abc.mjs");
  assert.equal(JSON.parse(args.at(-1)!).mode, "serve");
  assert.throws(
    () => denoArgs({ deno: "d", program: "p", readable: ["/a,b"], heapBytes: 1, config: JSON.parse("{}") }),
    /comma/,
  );
});

test("the subprocess gets an environment with nothing of the host's in it", () => {
  const env = denoEnv("/state/host.mjs", "linux");
  assert.deepEqual(Object.keys(env).sort(), [
    "DENO_DIR",
    "DENO_NO_PROMPT",
    "DENO_NO_UPDATE_CHECK",
    "NO_COLOR",
  ]);
  assert.equal(env.DENO_DIR, "/state/host.mjs/deno-dir", "a directory under a file can never be created");
});

test("without deno anywhere the runtime is unavailable and refuses to start", async () => {
  assert.equal(findDeno(undefined, ["/nonexistent"], { path: "" }), undefined);
  assert.equal(findDeno(undefined, ["/nonexistent"], { running: "/opt/deno", path: "" }), "/opt/deno");
  const broken = pyodide({ stateDir: STATE, deno: "/nonexistent/deno", snapshot: false });
  const detection = await broken.detect();
  assert.equal(detection.available, false);
  assert.match(detection.problems[0].message, /nonexistent\/deno/);
  await assert.rejects(broken.start(start()), /Cannot start a Pyodide sandbox.*nonexistent\/deno/);
  const noFiles = pyodide({ stateDir: STATE, assetDir: "/nonexistent/pyodide" });
  assert.equal((await noFiles.detect()).available, false);
  await assert.rejects(noFiles.start(start()), /Pyodide files are missing from "\/nonexistent\/pyodide"/);
});

test("detect finds deno and the Pyodide package; there are no containers to list or remove", async () => {
  const r = runtime();
  const detection = await r.detect();
  assert.equal(detection.available, true, JSON.stringify(detection.problems));
  assert.match(detection.version ?? "", /^314\.\d+\.\d+ \(deno 2\./);
  assert.deepEqual(await r.listManaged(), []);
  await r.remove("anything");
});

test("runs code, keeps state across calls, captures output and returns the last value", async () => {
  const m = sessions(runtime());
  try {
    const first = await m.run("s", "import sys\nx = 41\nprint('out')\nprint('err', file=sys.stderr)", {
      timeout: 30,
    });
    assert.equal(first.status, "ok", first.error);
    assert.equal(first.stdout, "out\n");
    assert.equal(first.stderr, "err\n");
    const second = await m.run(
      "s",
      "import os\nx += 1\nos.write(1, b'fd1\\n')\nprint('after', end='')\nx",
      { timeout: 30 },
    );
    assert.equal(second.status, "ok", second.error);
    assert.equal(second.stdout, "fd1\nafter");
    assert.equal(second.value, "42");
    const awaited = await m.run("s", "import asyncio\nawait asyncio.sleep(0.01)\n'done'", { timeout: 30 });
    assert.equal(awaited.value, "'done'");
    const none = await m.run("s", "y = [1, 2]", { timeout: 30 });
    assert.equal(none.value, undefined);
    const stdin = await m.run("s", "input()", { timeout: 30 });
    assert.match(stdin.error ?? "", /EOFError/, "stdin is at end of file, as /dev/null is in a container");
  } finally {
    await m.closeAll();
  }
});

test("reports a raised exception with the user's frames only", async () => {
  const m = sessions(runtime());
  try {
    const r = await m.run("s", "def f():\n    raise ValueError('bad value')\nf()", { timeout: 30 });
    assert.equal(r.status, "error");
    assert.match(r.error ?? "", /ValueError: bad value/);
    assert.match(r.error ?? "", /line 2, in f/);
    assert.doesNotMatch(r.error ?? "", /codemode_runtime|embedded\.py|pyodide_glue|executor\.py/);
    const syntax = await m.run("s", "def (", { timeout: 30 });
    assert.match(syntax.error ?? "", /SyntaxError/);
    assert.equal((await m.run("s", "1 + 1", { timeout: 30 })).value, "2");
  } finally {
    await m.closeAll();
  }
});

test("calls the host in parallel, and blocking helpers get their answers too", async () => {
  let active = 0, peak = 0;
  const rpc: RpcHandler = async (method, params, context) => {
    if (method !== "call_tool") return await echoRpc(method, params, context);
    active++;
    peak = Math.max(peak, active);
    await new Promise((resolve) => setTimeout(resolve, 300));
    active--;
    return { echoed: params.arguments };
  };
  const m = sessions(runtime(), { rpc });
  try {
    const one = await m.run("s", "await mcp_echo_server.echo(text='hi')", { timeout: 30 });
    assert.equal(one.value, "{'echoed': {'text': 'hi'}}", one.error);
    const started = performance.now();
    const many = await m.run(
      "s",
      "import asyncio\nlen(await asyncio.gather(*(mcp_echo_server.echo(i=i) for i in range(5))))",
      { timeout: 30 },
    );
    assert.equal(many.value, "5", many.error);
    assert.equal(peak, 5, "all five calls were in flight at once");
    assert.ok(performance.now() - started < 1200, "parallel calls overlap");
    // dir() on a proxy asks the host synchronously: Python blocks while the mailbox brings the answer.
    const listed = await m.run("s", "dir(mcp_echo_server)", { timeout: 30 });
    assert.equal(listed.status, "ok", listed.error);
    assert.equal(listed.value, "[]");
  } finally {
    await m.closeAll();
  }
});

test("interrupts a run at its timeout, whether it computes, sleeps or awaits, and keeps the session", async () => {
  // A long grace: on a busy machine the host's kill must not beat the sandbox's own interrupt, which is
  // what this test is about (each program would run 30 s or forever if it were not interrupted).
  const m = sessions(runtime(), { graceSeconds: 10 });
  try {
    await m.run("s", "kept = 'yes'", { timeout: 30 });
    for (
      const code of [
        "while True:\n    pass",
        "import time\ntime.sleep(30)",
        "import asyncio\nawait asyncio.sleep(30)",
      ]
    ) {
      const started = performance.now();
      const r = await m.run("s", code, { timeout: 1 });
      assert.equal(r.status, "timeout", `${code}: ${r.error}`);
      assert.ok(!r.sessionLost, `${code}: an interruptible run must not lose the session`);
      assert.match(r.error ?? "", /Timed out after 1s/);
      assert.ok(performance.now() - started < 10_000, `${code}: stopped soon after the timeout`);
      assert.equal((await m.run("s", "kept", { timeout: 30 })).value, "'yes'");
    }
  } finally {
    await m.closeAll();
  }
});

test("caps output per run and says so", async () => {
  const m = sessions(runtime());
  try {
    const r = await m.run(
      "s",
      "print('x' * (3 * 1024 * 1024))\nprint('err', file=__import__('sys').stderr)",
      { timeout: 30 },
    );
    assert.equal(r.status, "ok", r.error);
    assert.ok(r.stdout.length <= 1024 * 1024, `stdout is capped (${r.stdout.length})`);
    assert.ok(r.notes?.some((note) => /stdout/.test(note)), JSON.stringify(r.notes));
    assert.equal(r.stderr, "err\n", "the other stream has its own cap");
    assert.equal((await m.run("s", "print('small')", { timeout: 30 })).stdout, "small\n");
  } finally {
    await m.closeAll();
  }
});

test("caps memory: Python gets MemoryError and lives on, a runaway JS allocation ends the sandbox", async () => {
  const m = sessions(runtime()); // 256m
  try {
    const big = await m.run("s", "kept = 1\nb = bytearray(400 * 1024 * 1024)", { timeout: 30 });
    assert.equal(big.status, "error");
    assert.match(big.error ?? "", /MemoryError/);
    assert.equal(
      (await m.run("s", "len(bytearray(64 * 1024 * 1024))", { timeout: 30 })).value,
      String(64 * 1024 * 1024),
    );
    const js = await m.run(
      "s",
      "import js\nbufs = [js.Uint8Array.new(64 * 1024 * 1024).fill(1) for _ in range(12)]\n'survived'",
      { timeout: 30 },
    );
    assert.equal(js.sessionLost, true, JSON.stringify(js));
    assert.equal((await m.run("s", "'kept' in globals()", { timeout: 30 })).value, "False");
  } finally {
    await m.closeAll();
  }
});

test("kill() ends the subprocess at once and resolves exited", async () => {
  const sandbox = await runtime().start(start());
  const started = performance.now();
  await sandbox.kill();
  assert.equal(await sandbox.exited, null, "killed by a signal");
  assert.ok(performance.now() - started < 1000);
  await sandbox.kill(); // idempotent
});

test("installPyodideAssets copies the distribution once, and a sandbox runs from the copy", async () => {
  const state = mkdtempSync(join(tmpdir(), "codemode-test-pyodide-assets-"));
  try {
    const events: PrepareProgress[] = [];
    const source = findPyodideAssets([Deno.cwd()])!;
    const dir = await installPyodideAssets(source, state, (e) => events.push(e));
    assert.ok(dir.startsWith(join(state, "pyodide")));
    for (const file of PYODIDE_FILES) assert.ok(existsSync(join(dir, file)), file);
    assert.ok(events.filter((e) => e.phase === "copy").length > PYODIDE_FILES.length);
    const again: PrepareProgress[] = [];
    await installPyodideAssets(source, state, (e) => again.push(e));
    assert.equal(again.length, 1, "nothing copied the second time");
    const m = sessions(pyodide({ assetDir: dir, stateDir: state, snapshot: false }));
    try {
      assert.equal(
        (await m.run("s", "import sys\nsys.version_info[:2] >= (3, 12)", { timeout: 60 })).value,
        "True",
      );
    } finally {
      await m.closeAll();
    }
    assert.ok(readdirSync(dir).some((name) => /^host-\w+\.mjs$/.test(name)), "the host program sits beside");
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
});

test("start-up and round-trip times", async () => {
  const r = runtime();
  await (await r.start(start())).kill(); // makes the snapshot if this machine has none yet
  const session = new SandboxSession({
    runtime: r,
    sandbox: start(),
    bootstrap: bootstrapFrame({ max_output: 1024 * 1024, servers: [] }),
    rpc: echoRpc,
    maxOutput: 1024 * 1024,
  });
  const started = performance.now();
  await session.start();
  const cold = performance.now() - started;
  try {
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      const result = await session.execute("print(1)", { timeout: 30 });
      times.push(performance.now() - t);
      assert.equal(result.stdout, "1\n");
    }
    times.sort((a, b) => a - b);
    const p50 = times[100], p95 = times[190];
    console.log(
      `pyodide: cold start ${cold.toFixed(0)} ms; print(1) p50 ${p50.toFixed(2)} ms, p95 ${
        p95.toFixed(2)
      } ms`,
    );
    assert.ok(cold < 30_000, `cold start ${cold} ms`);
    assert.ok(p50 < 100, `p50 ${p50} ms`);
  } finally {
    await session.close();
  }
});
