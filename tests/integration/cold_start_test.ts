/**
 * Issue 19 with real podman and real `codemode serve` processes (from source): the detection cache is
 * used, and dropped when the engine binary changes, the image is removed or a session fails to start;
 * the sandbox is prewarmed as a stdio serve starts or when an HTTP client initializes, and the first call
 * uses it (one container, not two); no prewarmed container outlives the serve, even when the client leaves during the
 * prewarm. podman is reached through a wrapper on PATH that logs every command it is given, so the tests
 * see which engine commands each serve ran, and can slow down or fail `podman run`.
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { alive } from "./_harness.ts";
import { serve, type Served } from "./_serve.ts";
import { startHttpServe } from "./_serve_http.ts";
import { DETECTION_CACHE_FILE } from "../../core/sandbox/detection_cache.ts";

const IMAGE = "codemode-sandbox:latest";
const PODMAN = spawnSync("sh", ["-c", "command -v podman"], { encoding: "utf8" }).stdout.trim();
const usable = Boolean(PODMAN) && spawnSync(PODMAN, ["image", "exists", IMAGE]).status === 0;
const scratch = mkdtempSync(join(tmpdir(), "codemode-cold-start-"));
// A tag of our own, so removing "the image" removes nothing anyone else uses.
const TAG = `localhost/codemode-test-cold-start-${process.pid}:latest`;
globalThis.addEventListener("unload", () => {
  spawnSync(PODMAN, ["rmi", TAG], { stdio: "ignore" });
  rmSync(scratch, { recursive: true, force: true });
});

/** A podman wrapper in its own bin directory: logs each command, fails or slows `run` when told to. */
function wrapper(name: string) {
  const bin = join(scratch, name, "bin");
  const log = join(scratch, name, "podman.log");
  const fail = join(scratch, name, "fail-run");
  const slow = join(scratch, name, "slow-run");
  execFileSync("mkdir", ["-p", bin]);
  writeFileSync(
    join(bin, "podman"),
    `#!/bin/sh
printf '%s\\n' "$*" >> '${log}'
if [ "$1" = run ] && [ -e '${fail}' ]; then echo "Error: injected failure of podman run" >&2; exit 125; fi
if [ "$1" = run ] && [ -e '${slow}' ]; then sleep "$(cat '${slow}')"; fi
exec '${PODMAN}' "$@"
`,
  );
  chmodSync(join(bin, "podman"), 0o755);
  const home = join(scratch, name, "home");
  execFileSync("mkdir", ["-p", home]);
  return {
    home,
    bin,
    env: {
      PATH: `${bin}:${process.env.PATH}`,
      CODEMODE_RUNTIME: "podman",
      CODEMODE_IMAGE: TAG,
      CODEMODE_LOG_LEVEL: "info",
    },
    /** The engine commands logged since the last `commands()`, without forgetting them. */
    peek(): string[] {
      return existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : [];
    },
    /** The engine commands logged since the last call. */
    commands(): string[] {
      if (!existsSync(log)) return [];
      const lines = readFileSync(log, "utf8").split("\n").filter(Boolean);
      rmSync(log);
      return lines;
    },
    failRun: (on: boolean) => on ? writeFileSync(fail, "") : rmSync(fail, { force: true }),
    slowRun: (seconds: number) =>
      seconds ? writeFileSync(slow, String(seconds)) : rmSync(slow, { force: true }),
    cache: () => JSON.parse(readFileSync(join(home, "state", DETECTION_CACHE_FILE), "utf8")).entries,
  };
}

const probes = (commands: string[]) =>
  commands.filter((c) => c.startsWith("run ") && c.includes("codemode.probe"));
const sessionRuns = (commands: string[]) =>
  commands.filter((c) => c.startsWith("run ") && c.includes("codemode.session="));
const infos = (commands: string[]) => commands.filter((c) => c.startsWith("info"));

/** Containers (any state) a codemode process with this pid owns. */
function containersOf(pid: number): string[] {
  const out = spawnSync(PODMAN, [
    "ps",
    "-a",
    "--filter",
    `label=codemode.owner-pid=${pid}`,
    "--format",
    "{{.Names}}",
  ], {
    encoding: "utf8",
  });
  return out.stdout.split("\n").filter(Boolean);
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The exit of a serve's process (its pid must be gone, not a zombie). */
async function exited(pid: number, ms = 20_000): Promise<void> {
  await until(() => !alive(pid), ms, `serve ${pid} to exit`);
}

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });

async function answer(s: Served, code = "1 + 1"): Promise<string> {
  const r = await s.run(code);
  assert.equal(r.isError, false, r.text);
  return r.text.trim();
}

test("the detection cache is used, and dropped when the engine binary changes or the image goes", async () => {
  spawnSync(PODMAN, ["tag", IMAGE, TAG]);
  const w = wrapper("cache");
  const once = async () => {
    const s = await serve({ ...w.env, CODEMODE_PREWARM: "off" }, w.home);
    try {
      return await s.run("1 + 1");
    } finally {
      await s.close();
    }
  };
  assert.equal((await once()).text.trim(), "2");
  let commands = w.commands();
  assert.equal(probes(commands).length, 1, `a fresh state directory probes: ${commands.join(" | ")}`);
  assert.equal(infos(commands).length, 1);
  assert.equal(w.cache().podman.detection.available, true);

  assert.equal((await once()).text.trim(), "2");
  commands = w.commands();
  assert.deepEqual(probes(commands), [], "the cached verdict skips the probe container");
  assert.deepEqual(infos(commands), [], "and podman info");
  assert.equal(sessionRuns(commands).length, 1);

  // The engine binary changes (an upgrade): its size and mtime move, so the verdict is detected again.
  appendFileSync(join(w.bin, "podman"), "# upgraded\n");
  chmodSync(join(w.bin, "podman"), 0o755); // Deno's appendFileSync resets the mode
  assert.equal((await once()).text.trim(), "2");
  assert.equal(probes(w.commands()).length, 1, "a changed engine binary is probed again");

  // The image goes: the key's image id changes, detection runs and finds it missing.
  spawnSync(PODMAN, ["rmi", TAG]);
  const gone = await once();
  assert.equal(gone.isError, true);
  assert.match(gone.text, new RegExp(`The sandbox image "${TAG}" is missing`));
  assert.equal(w.cache().podman.detection.available, false);
  assert.equal(probes(w.commands()).length, 0, "no probe without an image");
});

test("a session that fails to start drops the cached verdict and detects afresh", async () => {
  spawnSync(PODMAN, ["tag", IMAGE, TAG]);
  const w = wrapper("fail");
  const s1 = await serve({ ...w.env, CODEMODE_PREWARM: "off" }, w.home);
  assert.equal(await answer(s1), "2");
  await s1.close();
  assert.equal(w.cache().podman.detection.available, true);
  w.commands();

  // The verdict still matches its key, but podman run now fails (say, a broken OCI runtime).
  w.failRun(true);
  const s2 = await serve({ ...w.env, CODEMODE_PREWARM: "off" }, w.home);
  try {
    const failed = await s2.run("1 + 1");
    assert.equal(failed.isError, true);
    assert.match(failed.text, /injected failure of podman run/);
    const commands = w.commands();
    // Cached verdict used (no info before the session's run), the session fails, the verdict is dropped,
    // and detection runs again from scratch: info, then the probe container.
    const firstRun = commands.findIndex((c) => c.startsWith("run "));
    const info = commands.findIndex((c) => c.startsWith("info"));
    assert.ok(firstRun >= 0 && info > firstRun, commands.map((c) => c.slice(0, 60)).join(" | "));
    assert.equal(probes(commands).length, 1, "detected afresh: the probe ran");
    assert.equal(w.cache().podman.detection.available, false, "the stale 'works' verdict is gone");
  } finally {
    await s2.close();
    w.failRun(false);
  }
});

test("stdio: the sandbox starts as the serve starts, and the first call uses it", async () => {
  spawnSync(PODMAN, ["tag", IMAGE, TAG]);
  const w = wrapper("prewarm-stdio");
  const s = await serve(w.env, w.home);
  const pid = s.transport.pid!;
  try {
    await until(() => containersOf(pid).length === 1, 180_000, "a prewarmed container");
    const before = containersOf(pid);
    assert.equal(await answer(s, "x = 41\nx + 1"), "42");
    assert.equal(await answer(s, "x"), "41");
    assert.deepEqual(containersOf(pid), before, "the same container answered");
    assert.equal(sessionRuns(w.commands()).length, 1, "one sandbox, not two");
  } finally {
    await s.close();
  }
  await exited(pid);
  assert.deepEqual(containersOf(pid), []);
});

test("HTTP: sessions are prewarmed with CODEMODE_PREWARM=on, within CODEMODE_MAX_SESSIONS, not by default", async () => {
  spawnSync(PODMAN, ["tag", IMAGE, TAG]);
  const w = wrapper("prewarm-http");
  const connect = async (url: string) => {
    const client = new Client({ name: "cold-start-http", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return client;
  };
  const call = async (client: Client, code: string) => {
    const r = await client.callTool({ name: "run_python", arguments: { code } });
    return (r.content as { text: string }[])[0].text.trim();
  };
  const http = await startHttpServe(w.home, { ...w.env, CODEMODE_PREWARM: "on", CODEMODE_MAX_SESSIONS: "2" });
  try {
    const clients = [await connect(http.url), await connect(http.url)];
    await until(() => containersOf(http.pid).length === 2, 180_000, "two prewarmed containers");
    const third = await connect(http.url);
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(containersOf(http.pid).length, 2, "the third session is not prewarmed past the cap");
    const prewarmed = containersOf(http.pid).sort();
    assert.equal(await call(clients[0], "6 * 7"), "42");
    assert.deepEqual(containersOf(http.pid).sort(), prewarmed, "the first call used its prewarmed container");
    assert.equal(sessionRuns(w.commands()).length, 2);
    await Promise.all([...clients, third].map((c) => c.close()));
  } finally {
    assert.equal(await http.stop(), 0);
  }
  await until(() => containersOf(http.pid).length === 0, 10_000, "no container after the serve");

  const plain = await startHttpServe(w.home, w.env);
  try {
    const client = await connect(plain.url);
    await new Promise((r) => setTimeout(r, 3000));
    assert.deepEqual(containersOf(plain.pid), [], "HTTP sessions are not prewarmed by default");
    assert.equal(await call(client, "1 + 1"), "2");
    await client.close();
  } finally {
    await plain.stop();
  }
});

test("no prewarmed container outlives the serve, even when the client leaves during the prewarm", async () => {
  spawnSync(PODMAN, ["tag", IMAGE, TAG]);
  const w = wrapper("leave");
  // Warm the detection cache first, so every serve below goes straight to starting its container.
  await (await serve(w.env, w.home)).close();
  w.slowRun(1.5);
  try {
    // The client leaves at once; once `podman run` was issued (the container not yet made); and once the
    // container exists (the sandbox still booting or just ready).
    const moments: [string, (pid: number) => boolean][] = [
      ["at once", () => true],
      ["during podman run", () => sessionRuns(w.peek()).length === 1],
      ["once the container exists", (pid) => containersOf(pid).length === 1],
    ];
    for (const [when, reached] of moments) {
      w.commands();
      const s = await serve(w.env, w.home);
      const pid = s.transport.pid!;
      await until(() => reached(pid), 180_000, `the moment to leave: ${when}`);
      await s.close();
      await exited(pid);
      assert.deepEqual(containersOf(pid), [], `left ${when}: a container outlived the serve`);
    }
  } finally {
    w.slowRun(0);
  }

  // HTTP: a session deleted during its prewarm, and a SIGTERM during another's.
  const http = await startHttpServe(w.home, { ...w.env, CODEMODE_PREWARM: "on" });
  w.slowRun(1.5);
  try {
    w.commands();
    const client = new Client({ name: "cold-start-leave", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(http.url));
    await client.connect(transport);
    await until(() => sessionRuns(w.peek()).length === 1, 180_000, "the prewarm's podman run");
    await transport.terminateSession();
    await client.close();
    await until(() => containersOf(http.pid).length === 0, 15_000, "the deleted session's container to go");
    const other = new Client({ name: "cold-start-leave-2", version: "1" });
    w.commands();
    await other.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    await until(() => sessionRuns(w.peek()).length === 1, 180_000, "the second prewarm's podman run");
  } finally {
    w.slowRun(0);
    assert.equal(await http.stop("SIGTERM"), 0);
  }
  assert.deepEqual(containersOf(http.pid), [], "a container outlived the HTTP serve");
});

test("an unused prewarmed sandbox is stopped at the idle timeout while the serve runs on", async () => {
  spawnSync(PODMAN, ["tag", IMAGE, TAG]);
  const w = wrapper("idle");
  const s = await serve({ ...w.env, CODEMODE_IDLE_TIMEOUT: "2s" }, w.home);
  const pid = s.transport.pid!;
  try {
    await until(() => containersOf(pid).length === 1, 180_000, "a prewarmed container");
    await until(() => containersOf(pid).length === 0, 15_000, "the idle prewarmed container to stop");
    assert.equal(await answer(s), "2", "a later call starts a fresh sandbox");
  } finally {
    await s.close();
  }
});
