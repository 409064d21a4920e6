/**
 * Faults around a real `codemode serve` (stdio, SDK client): upstream MCP servers that crash, hang,
 * flood, answer garbage, invalid JSON-RPC or huge results, or die at start; the sandbox container killed
 * from outside; the engine binary gone mid-session. Every call is answered within a bound, the server
 * keeps serving, no container of the serve is left, and no secret shows up in any answer.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { docker } from "../../plugins/runtime/docker.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import {
  type Answer,
  assertNoSandboxOf,
  assertStillServing,
  fakeHome,
  HOST_SECRET,
  ROOT,
  runWithin,
  sandboxesOf,
  serve,
  type Served,
  SERVER_SECRET,
} from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";

const FAULTY_SECRET = `faulty-secret-${crypto.randomUUID()}`;
const SECRETS = [FAULTY_SECRET, SERVER_SECRET, HOST_SECRET];
const deno = join(ROOT, "node_modules/.bin/deno");
const faulty = (flags: string[] = [], extra: Record<string, unknown> = {}) => ({
  command: deno,
  args: ["run", "-A", "--quiet", join(ROOT, "tests/testdata/servers/faulty_server.ts"), ...flags],
  env: { FAULTY_TOKEN: FAULTY_SECRET },
  ...extra,
});
const SERVERS = {
  faulty: faulty([], { timeout: 3000 }),
  garbage: faulty(["--garbage"]),
  startfail: faulty(["--exit-at-start=4"]),
  floodstart: faulty(["--flood-at-start=20"]),
  silent: faulty(["--silent"]),
};

const engines: [string, RuntimePlugin & ImageStore][] = [["podman", podman()], ["docker", docker()]];
const usable = new Map<string, boolean>();
for (const [name, runtime] of engines) {
  usable.set(name, (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE));
  if (!usable.get(name)) {
    console.warn(`IGNORED fault suite on ${name}: engine or image ${TEST_IMAGE} missing`);
  }
}

/** A serve whose every answer is kept, to check at the end that none carried a secret. */
interface Session {
  served: Served;
  answers: Answer[];
  run(code: string, timeout?: number): Promise<Answer>;
  /** Everything serve wrote on its stderr so far. */
  stderr(): string;
}

async function session(engine: string, env: Record<string, string> = {}): Promise<Session> {
  const served = await serve(
    { CODEMODE_RUNTIME: engine, CODEMODE_MEMORY: "256m", CODEMODE_LOG_LEVEL: "warn", ...env },
    fakeHome(SERVERS),
  );
  let stderr = "";
  served.transport.stderr?.on("data", (chunk: Uint8Array) => {
    if (stderr.length < 4_000_000) stderr += new TextDecoder().decode(chunk);
  });
  const answers: Answer[] = [];
  return {
    served,
    answers,
    stderr: () => stderr,
    async run(code, timeout = 20) {
      const answer = await runWithin(served, code, timeout, timeout * 1000 + 60_000);
      answers.push(answer);
      return answer;
    },
  };
}

/**
 * Runs `body` on a session, then closes the serve and checks what every fault test promises at the end:
 * no container of the serve left (any found is failed on, then removed so the machine stays clean) and no
 * secret in any answer. The first failure is the one reported.
 */
async function closing(s: Session, runtime: RuntimePlugin, body: () => Promise<void>): Promise<void> {
  let failure: unknown;
  const attempt = async (step: () => Promise<void>) => {
    try {
      await step();
    } catch (error) {
      failure ??= error;
    }
  };
  const pid = s.served.transport.pid;
  await attempt(body);
  await attempt(() => s.served.close());
  await attempt(() => assertNoSandboxOf(runtime, pid));
  for (const name of await sandboxesOf(runtime, pid)) await runtime.remove(name).catch(() => {});
  for (const answer of s.answers) {
    const text = answer.text + JSON.stringify(answer.structured);
    if (SECRETS.some((secret) => text.includes(secret))) {
      failure ??= new Error(`A secret is in: ${text.slice(0, 300)}`);
    }
  }
  if (failure) throw failure;
}

/** Runs `fn` with a fresh serve on `engine`, then closes it as `closing()` says. */
function faultTest(engine: string, name: string, fn: (s: Session, runtime: RuntimePlugin) => Promise<void>) {
  const runtime = engines.find(([n]) => n === engine)![1];
  Deno.test({
    name: `${engine}: ${name}`,
    ignore: !usable.get(engine),
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const s = await session(engine);
      await closing(s, runtime, async () => {
        await fn(s, runtime);
        await assertStillServing(s.served);
      });
    },
  });
}

/** The value of a run that caught the exception of one awaited call: "ok: <value>" or "<Type>: <message>". */
const outcome = (call: string) => `
try:
    _v = ${call}
    _o = "ok: " + str(_v)[:200]
except BaseException as e:
    _o = type(e).__name__ + ": " + str(e)[:400]
_o`;

faultTest(
  "podman",
  "an upstream that crashes mid-call fails that call and its bystanders, then restarts",
  async (s) => {
    const r = await s.run(`
import asyncio
before = await mcp_faulty.pid()
calls = [mcp_faulty.slow(ms=10_000, message="late") for _ in range(5)] + [mcp_faulty.crash(code=7)]
outcomes = await asyncio.gather(*calls, return_exceptions=True)
after = await mcp_faulty.pid()
(all("exited (code 7)" in str(o) for o in outcomes), [type(o).__name__ for o in outcomes], before != after)`);
    assert.equal(r.isError, false, r.text);
    assert.match(String(r.structured.value), /^\(True, .*, True\)$/);
  },
);

faultTest(
  "podman",
  "a hanging upstream call times out per its config and the server stays usable",
  async (s) => {
    const r = await s.run(outcome("await mcp_faulty.hang()"));
    assert.match(String(r.structured.value), /^'TimeoutError: .*timed out after 3000 ms/);
    assert.equal(
      (await s.run(outcome("await mcp_faulty.echo(message='back')"))).structured.value,
      "'ok: back'",
    );
  },
);

faultTest(
  "podman",
  "a run that times out while an upstream call hangs ends on time and cancels the call",
  async (s) => {
    await s.run("await mcp_faulty.pid()");
    // The run's 1 s timeout comes before the server's 3 s call timeout.
    const r = await s.run("await mcp_faulty.hang()", 1);
    assert.equal(r.structured.status, "timeout");
    assert.ok(r.ms < 20_000, `answered after ${r.ms} ms`);
    assert.notEqual(r.structured.session_lost, true);
    const cancelled = await s.run(`
import asyncio
for _ in range(50):
    n = await mcp_faulty.cancellations()
    if n != 0:
        break
    await asyncio.sleep(0.1)
n`);
    assert.equal(cancelled.structured.value, "1", "the server never heard the call was cancelled");
  },
);

faultTest(
  "podman",
  "an upstream flooding stderr neither stalls the call nor floods serve's stderr",
  async (s) => {
    const r = await s.run(outcome("await mcp_faulty.flood_stderr(mb=30)"), 60);
    assert.equal(r.structured.value, "'ok: wrote 30 MB'", r.text);
    const flood = await s.run(outcome("await mcp_floodstart.echo(message='started')"), 60);
    assert.equal(flood.structured.value, "'ok: started'", flood.text);
    assert.ok(s.stderr().length < 1_000_000, `serve wrote ${s.stderr().length} bytes to stderr`);
  },
);

faultTest("podman", "garbage on an upstream's stdout is skipped", async (s) => {
  const r = await s.run(outcome("await mcp_garbage.garbage()"));
  assert.equal(r.structured.value, "'ok: after garbage'", r.text);
  assert.equal(
    (await s.run(outcome("await mcp_garbage.echo(message='clean')"))).structured.value,
    "'ok: clean'",
  );
});

faultTest("podman", "invalid JSON-RPC replies fail their calls within the server's timeout", async (s) => {
  const r = await s.run(
    `
import asyncio, time
kinds = ["result_not_object", "error_not_object", "result_and_error", "wrong_version", "unknown_id",
         "truncated", "content_not_list"]
started = time.monotonic()
outcomes = await asyncio.gather(*[mcp_faulty.forge_reply(kind=k) for k in kinds], return_exceptions=True)
after = await mcp_faulty.echo(message="still here")
(sorted({type(o).__name__ for o in outcomes}), time.monotonic() - started < 15, after)`,
    60,
  );
  assert.equal(r.isError, false, r.text);
  const value = String(r.structured.value);
  assert.doesNotMatch(value, /'str'|'dict'|'list'/, "an invalid reply was taken as a result");
  assert.match(value, /, True, 'still here'\)$/);
});

faultTest(
  "podman",
  "a 20 MB result is refused with a clear error and a 10 MB one comes through",
  async (s) => {
    const big = await s.run(outcome("len(await mcp_faulty.big(mb=20))"), 60);
    assert.match(String(big.structured.value), /^'ToolError: .*20\.0 MiB, over the 16\.0 MiB/);
    const ok = await s.run(outcome("len(await mcp_faulty.big(mb=10))"), 60);
    assert.equal(ok.structured.value, `'ok: ${10 * 1024 * 1024}'`);
    const odd = await s.run(outcome("await mcp_faulty.unknown_content()"));
    assert.match(String(odd.structured.value), /Invalid tools\/call result|failed the call/);
  },
);

faultTest(
  "podman",
  "a result nested 3000 levels deep fails its call clearly and the session goes on",
  async (s) => {
    await s.run("kept = 1");
    const deep = await s.run(outcome("await mcp_faulty.deep(depth=3000)"), 10);
    assert.equal(deep.structured.status, "ok", deep.text.slice(0, 600));
    assert.match(String(deep.structured.value), /nested|deep/);
    const next = await s.run("kept", 10);
    assert.equal(next.structured.value, "1", next.text.slice(0, 600));
  },
);

faultTest("podman", "an upstream that exits at start fails each call with its exit code", async (s) => {
  for (let i = 0; i < 2; i++) {
    const r = await s.run(outcome("await mcp_startfail.echo(message='x')"));
    assert.match(String(r.structured.value), /failed to start: it exited \(code 4\)/);
  }
});

faultTest(
  "podman",
  "a run waiting on an upstream that never finishes its handshake ends at its timeout",
  async (s) => {
    const r = await s.run("await mcp_silent.echo(message='x')", 3);
    assert.equal(r.structured.status, "timeout");
    assert.ok(r.ms < 20_000, `answered after ${r.ms} ms`);
  },
);

for (const [engine] of engines) {
  faultTest(
    engine,
    "the sandbox container killed from outside mid-run loses the session, says so, and the next call starts fresh",
    async (s, runtime) => {
      await s.run("x = 1");
      const [name] = await sandboxesOf(runtime, s.served.transport.pid);
      assert.ok(name, "no sandbox labelled with the serve pid");
      const running = s.run("import time\ntime.sleep(30)", 40);
      await new Promise((r) => setTimeout(r, 1500));
      execFileSync(engine, ["kill", name], { stdio: "ignore" });
      const r = await running;
      assert.equal(r.isError, true);
      assert.equal(r.structured.session_lost, true, r.text);
      assert.ok(r.ms < 25_000, `answered after ${r.ms} ms`);
      assert.equal((await s.run("'x' in globals()")).structured.value, "False");
    },
  );

  faultTest(
    engine,
    "the sandbox container killed from outside between runs is replaced, and the loss is reported",
    async (s, runtime) => {
      await s.run("x = 1");
      const [name] = await sandboxesOf(runtime, s.served.transport.pid);
      assert.ok(name, "no sandbox labelled with the serve pid");
      execFileSync(engine, ["kill", name], { stdio: "ignore" });
      await assertNoSandboxOf(runtime, s.served.transport.pid);
      // Either the next call runs in a fresh sandbox, or it says the session was lost and the one after runs.
      const next = await s.run("print('fresh')");
      if (next.structured.stdout !== "fresh\n") {
        assert.equal(next.structured.session_lost, true, `neither ran nor reported the loss: ${next.text}`);
        assert.equal((await s.run("print('fresh')")).structured.stdout, "fresh\n");
      }
      assert.equal((await s.run("'x' in globals()")).structured.value, "False");
    },
  );
}

/** A `podman` first on serve's PATH (the only one there) that the test can break, remove and restore. */
interface EngineWrapper {
  /** The directory to use as serve's PATH: the wrapper, node and deno. */
  bin: string;
  works(): void;
  fails(message: string): void;
  remove(): void;
}

function engineWrapper(): EngineWrapper {
  const bin = mkdtempSync(join(tmpdir(), "codemode-bin-"));
  const wrapper = join(bin, "podman");
  const which = (tool: string) =>
    execFileSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).trim();
  const real = which("podman");
  for (const tool of ["node", "deno"]) symlinkSync(which(tool), join(bin, tool));
  const install = (body: string) => {
    writeFileSync(wrapper, `#!/bin/sh\n${body}\n`);
    chmodSync(wrapper, 0o755);
  };
  const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  return {
    bin,
    works: () => install(`PATH=${systemPath} exec ${real} "$@"`),
    fails: (message) => install(`echo "${message}" >&2\nexit 125`),
    remove: () => rmSync(wrapper, { force: true }),
  };
}

Deno.test({
  name:
    "podman: the engine binary gone or broken mid-session gives clear errors, serve keeps answering, and it recovers",
  ignore: !usable.get("podman"),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const runtime = podman();
    const engine = engineWrapper();
    engine.works();
    const s = await session("podman", { PATH: engine.bin });
    await closing(s, runtime, async () => {
      try {
        await binaryGone(s, runtime, engine);
      } finally {
        engine.works();
      }
    }).finally(() => rmSync(engine.bin, { recursive: true, force: true }));
  },
});

async function binaryGone(s: Session, runtime: RuntimePlugin, engine: EngineWrapper): Promise<void> {
  assert.equal((await s.run("x = 41\nx")).structured.value, "41");

  engine.remove();
  assert.equal((await s.run("x + 1")).structured.value, "42", "a running sandbox needs no engine binary");
  const lost = await s.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 10);
  assert.equal(lost.structured.session_lost, true);
  const missing = await s.run("print(1)");
  assert.equal(missing.isError, true);
  assert.match(missing.text, /podman/i);
  assert.match(missing.text, /not (found|installed)|ENOENT|no such file/i);

  engine.fails("Error: simulated engine failure");
  const broken = await s.run("print(1)");
  assert.equal(broken.isError, true);
  assert.match(broken.text, /simulated engine failure/);

  engine.works();
  assert.equal((await s.run("print(1)")).structured.stdout, "1\n");

  // A run that must be killed while the binary is gone: the sandbox ignores SIGINT and holds the GIL,
  // so only the engine can stop it. Once the binary is back, nothing of it may remain.
  engine.remove();
  const stuck = await s.run(
    "import re, signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nre.match(r'(a+)+$', 'a' * 64 + 'b')",
    2,
  );
  assert.equal(stuck.structured.session_lost, true, stuck.text);
  engine.works();
  await assertStillServing(s.served);
  // No container outlives its session: with the engine back, only the live sandbox may remain.
  let left = await sandboxesOf(runtime, s.served.transport.pid);
  for (let i = 0; i < 30 && left.length > 1; i++) {
    await new Promise((r) => setTimeout(r, 500));
    left = await sandboxesOf(runtime, s.served.transport.pid);
  }
  assert.equal(left.length, 1, `the killed run's container outlives its session: ${left.join(", ")}`);
}
