/**
 * The OCI runtime plugins against real engines: rootful podman, rootless podman (through runuser) and
 * docker. Each sandbox is checked from the inside (uid, capabilities, read-only root, noexec tmpfs, no
 * network, no host environment, pids and memory limits) and its lifecycle from the outside; the shared
 * runtime contract suite runs against each engine too.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";
import type { RuntimePlugin, SandboxLimits, SandboxProcess } from "../../core/contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../../core/sandbox/image_build.ts";
import { execCli } from "../../plugins/runtime/_oci_exec.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import type { OciOptions } from "../../plugins/runtime/oci_base.ts";
import { podman } from "../../plugins/runtime/podman.ts";

const IMAGE = process.env.CODEMODE_IMAGE ?? DEFAULT_IMAGE;
const ROOTLESS_USER = process.env.CODEMODE_ROOTLESS_USER ?? "codemode-rootless";
const SECRET = `hunter2-${randomBytes(6).toString("hex")}`;
const LIMITS: SandboxLimits = { memory: "256m", pids: 32 };

// The sandbox must not see anything of the host process's environment, proxies included.
process.env.CODEMODE_TEST_SECRET = SECRET;
process.env.http_proxy = `http://${SECRET}.invalid:3128`;

const hasRootlessUser = readFileSync("/etc/passwd", "utf8").split("\n").some((line) =>
  line.startsWith(`${ROOTLESS_USER}:`)
);

interface Engine {
  label: string;
  command: string[];
  make: () => RuntimePlugin;
  skip?: string;
}

const ENGINES: Engine[] = [
  { label: "podman", command: ["podman"], make: () => podman() },
  {
    label: "rootless podman",
    command: ["runuser", "-u", ROOTLESS_USER, "--", "podman"],
    make: () => podman({ command: ["runuser", "-u", ROOTLESS_USER, "--", "podman"] }),
    skip: hasRootlessUser
      ? undefined
      : `user "${ROOTLESS_USER}" does not exist (scripts/setup.sh creates it)`,
  },
  { label: "docker", command: ["docker"], make: () => docker() },
];

const probe = (file: string) =>
  readFileSync(new URL(`../testdata/oci_probes/${file}`, import.meta.url), "utf8");
const FACTS = probe("facts.py");
const FORK_COUNT = probe("fork_count.py");
const FORK_BOMB = probe("fork_bomb.py");
const MEMORY_HOG = probe("memory_hog.py");

function sandboxName(label: string): string {
  return `codemode-test-oci-${label.replace(/\W+/g, "-")}-${randomBytes(4).toString("hex")}`;
}

async function startPython(runtime: RuntimePlugin, name: string, code: string, extra: string[] = []) {
  return await runtime.start({
    name,
    image: IMAGE,
    command: ["python3", "-c", code, ...extra],
    limits: LIMITS,
    labels: { "codemode.test": "oci_runtime" },
  });
}

/** Reads stdout up to the first newline. */
async function firstLine(sandbox: SandboxProcess): Promise<string> {
  const reader = sandbox.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split("\n")[0];
}

/** Sandbox processes on the host whose command line carries `marker` (forks keep their parent's command
 * line); the engine CLI carries it too but runs outside the sandbox, so it does not count. */
function processesWith(marker: string): number {
  let count = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (argv.includes(marker) && !/(^|\/)(podman|docker|runuser)$/.test(argv[0])) count++;
    } catch {
      // the process ended while we looked
    }
  }
  return count;
}

/** Names of all containers the engine knows, running or not. */
async function allContainers(engine: Engine): Promise<string[]> {
  const result = await execCli([...engine.command, "ps", "-a", "--format", "{{.Names}}"]);
  assert.equal(result.code, 0, result.stderr);
  return result.stdout.split("\n").map((name) => name.trim()).filter(Boolean);
}

async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return check();
}

/** The engine's plugin with other options. */
function withImage(engine: Engine, image: string, options: OciOptions = {}): RuntimePlugin {
  const factory = engine.label === "docker" ? docker : podman;
  return factory({ command: engine.command, image, ...options });
}

Deno.test("detect() reports an engine that is not installed, with how to install it", async () => {
  const detection = await podman({ command: ["codemode-no-such-engine"] }).detect();
  assert.deepEqual(detection, {
    name: "podman",
    available: false,
    version: undefined,
    rootless: undefined,
    problems: [{
      message: "podman is not installed",
      fix: "Install it (Debian: apt-get install podman) or choose another runtime",
    }],
  });
});

Deno.test("docker detect() explains a daemon that is not running", async () => {
  const saved = process.env.DOCKER_HOST;
  process.env.DOCKER_HOST = "unix:///tmp/codemode-test-no-daemon.sock";
  try {
    const detection = await docker().detect();
    assert.equal(detection.available, false);
    assert.equal(detection.problems[0]?.message, "The Docker daemon is not running");
    assert.match(detection.problems[0]?.fix ?? "", /dockerd/);
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  }
});

for (const engine of ENGINES) {
  // The behaviour every runtime shares (sessions, timeouts, kills, reaping), then what only containers do.
  if (engine.skip) console.warn(`IGNORED ${engine.label} OCI runtime tests: ${engine.skip}`);
  const test = (name: string, fn: (runtime: RuntimePlugin) => Promise<void>) =>
    Deno.test({
      name: `${engine.label}: ${name}`,
      ignore: Boolean(engine.skip),
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => fn(engine.make()),
    });

  test("detect() finds the engine working with the sandbox image", async (runtime) => {
    const detection = await runtime.detect();
    assert.equal(detection.available, true, JSON.stringify(detection.problems));
    assert.equal(detection.rootless, engine.label.startsWith("rootless"));
    assert.match(detection.version ?? "", /^\d+\.\d+/);
  });

  test("detect() names a missing image and the command that builds it", async () => {
    const detection = await withImage(engine, "codemode-test-missing:1").detect();
    assert.equal(detection.available, false);
    assert.deepEqual(detection.problems.at(-1), {
      message: `The sandbox image "codemode-test-missing:1" is missing`,
      fix: `Build it: codemode image build --runtime ${engine.make().name} --tag codemode-test-missing:1`,
    });
  });

  test("detect() explains ulimits the host cannot grant", async () => {
    // Above fs.nr_open no process may raise RLIMIT_NOFILE, root included.
    const nrOpen = Number(readFileSync("/proc/sys/fs/nr_open", "utf8"));
    const detection = await withImage(engine, IMAGE, { nofile: nrOpen + 1 }).detect();
    assert.equal(detection.available, false);
    assert.match(detection.problems.at(-1)?.fix ?? "", /Lower the nofile\/nproc plugin options/);
  });

  test("a sandbox runs as nobody with no capabilities, no network, no host env and a read-only root", async (runtime) => {
    const sandbox = await startPython(runtime, sandboxName(engine.label), FACTS);
    try {
      const [out, err, code] = await Promise.all([
        new Response(sandbox.stdout).text(),
        new Response(sandbox.stderr).text(),
        sandbox.exited,
      ]);
      assert.equal(code, 0, err);
      const facts = JSON.parse(out);
      assert.equal(facts.uid, 65534);
      assert.equal(facts.gid, 65534);
      assert.equal(facts.cwd, "/workspace");
      assert.equal(facts.cap_eff, "0000000000000000");
      assert.equal(facts.no_new_privs, "1");
      assert.equal(facts.root_ro, true);
      assert.equal(facts.root_write, "EROFS");
      // Only the two tmpfs mounts and /dev/shm (noexec, inside the memory limit) take writes.
      assert.deepEqual(facts.writable, ["/tmp", "/workspace", "/dev/shm"]);
      assert.deepEqual(facts.exec, { "/tmp": "EACCES", "/workspace": "EACCES" });
      assert.notEqual(facts.connect, "ok");
      assert.deepEqual(facts.interfaces, ["lo"]);
      assert.equal(facts.pid1 === "python3", false, "an init runs as PID 1");
      assert.deepEqual(facts.rlimit_nofile, ["1024", "1024"]);
      const env = JSON.stringify(facts.env);
      assert.equal(env.includes(SECRET), false, env);
      assert.equal("CODEMODE_TEST_SECRET" in facts.env, false);
      assert.equal("http_proxy" in facts.env, false);
      assert.deepEqual(
        Object.keys(facts.env).filter((k) =>
          !/^(PATH|HOME|HOSTNAME|LANG|TERM|MPLCONFIGDIR|container)$/.test(k)
        ),
        [],
      );
    } finally {
      await sandbox.kill();
    }
  });

  test("the process limit stops forking at the configured number", async (runtime) => {
    const sandbox = await startPython(runtime, sandboxName(engine.label), FORK_COUNT);
    try {
      const [forks, reason] = (await firstLine(sandbox)).split(" ", 2);
      assert.ok(Number(forks) > 5 && Number(forks) < LIMITS.pids, `forked ${forks} times (${reason})`);
    } finally {
      await sandbox.kill();
    }
  });

  test("a fork bomb stays bounded and kill() ends it and removes the container", async (runtime) => {
    const name = sandboxName(engine.label);
    const marker = `bomb-${name}`;
    const sandbox = await startPython(runtime, name, FORK_BOMB, [marker]);
    try {
      assert.equal(await firstLine(sandbox), "started");
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const running = processesWith(marker);
      assert.ok(running > 5 && running <= LIMITS.pids, `${running} bomb processes on the host`);
      const started = performance.now();
      await sandbox.kill();
      const seconds = (performance.now() - started) / 1000;
      console.log(`${engine.label}: kill() of a fork bomb took ${seconds.toFixed(2)} s`);
      assert.ok(seconds < 10, `kill() took ${seconds} s`);
      await sandbox.exited;
      assert.ok(
        await eventually(() => Promise.resolve(processesWith(marker) === 0)),
        "bomb processes remain",
      );
      assert.equal((await allContainers(engine)).includes(name), false);
    } finally {
      await sandbox.kill();
    }
  });

  test("the memory limit stops a program that allocates 1 GiB", async (runtime) => {
    const sandbox = await startPython(runtime, sandboxName(engine.label), MEMORY_HOG);
    try {
      const [out, code] = await Promise.all([new Response(sandbox.stdout).text(), sandbox.exited]);
      const lines = out.trim().split("\n");
      assert.equal(lines.includes("allocated all"), false, out);
      const reached = Math.max(0, ...lines.map(Number).filter(Number.isFinite));
      assert.ok(reached <= 256, `allocated ${reached} MiB under a 256m limit`);
      // cgroup limits end in the OOM killer (137); the RLIMIT_DATA stand-in raises MemoryError.
      assert.ok(code === 137 || lines.at(-1) === "MemoryError", `exit ${code}, output ${out}`);
    } finally {
      await sandbox.kill();
    }
  });

  test("a program that kills itself and signals PID 1 ends the sandbox cleanly", async (runtime) => {
    const name = sandboxName(engine.label);
    const code =
      "import os, signal, time\nos.kill(1, signal.SIGKILL)\ntime.sleep(0.5)\nos.kill(os.getpid(), 9)";
    const sandbox = await startPython(runtime, name, code);
    try {
      const exit = await Promise.race([
        sandbox.exited,
        new Promise((resolve) => setTimeout(() => resolve("still running"), 15_000)),
      ]);
      assert.equal(exit, 137);
      assert.ok(
        await eventually(async () => !(await allContainers(engine)).includes(name)),
        "the container remains",
      );
    } finally {
      await sandbox.kill();
    }
  });

  test("listManaged() finds a running sandbox, kill() removes it, remove() is idempotent", async (runtime) => {
    const name = sandboxName(engine.label);
    const sandbox = await startPython(runtime, name, "import sys\nprint('up', flush=True)\nsys.stdin.read()");
    try {
      assert.equal(await firstLine(sandbox), "up");
      const managed = await runtime.listManaged();
      const mine = managed.find((sandbox) => sandbox.name === name);
      // The image's own label (which codemode built it) comes along on engines that merge image labels in.
      const { "codemode.version": _image, ...labels } = mine?.labels ?? {};
      assert.deepEqual(labels, { "codemode.managed": "true", "codemode.test": "oci_runtime" });
      const started = performance.now();
      await sandbox.kill();
      console.log(`${engine.label}: kill() took ${((performance.now() - started) / 1000).toFixed(2)} s`);
      assert.notEqual(await sandbox.exited, 0);
      assert.equal((await allContainers(engine)).includes(name), false);
      assert.equal((await runtime.listManaged()).some((sandbox) => sandbox.name === name), false);
      await sandbox.kill();
      await runtime.remove(name);
      await runtime.remove(name);
    } finally {
      await sandbox.kill();
    }
  });

  test("kill() right after start() leaves no container behind", async (runtime) => {
    const name = sandboxName(engine.label);
    const sandbox = await startPython(runtime, name, "import time\ntime.sleep(60)");
    await sandbox.kill();
    await sandbox.exited;
    // Give an engine that was still creating the container time to finish, then look.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.equal((await allContainers(engine)).includes(name), false);
  });

  test("remove() stops a running sandbox by name", async (runtime) => {
    const name = sandboxName(engine.label);
    const sandbox = await startPython(runtime, name, "import sys\nprint('up', flush=True)\nsys.stdin.read()");
    try {
      assert.equal(await firstLine(sandbox), "up");
      await runtime.remove(name);
      assert.notEqual(await sandbox.exited, 0);
      assert.equal((await allContainers(engine)).includes(name), false);
    } finally {
      await sandbox.kill();
    }
  });

  test("stdin and stdout carry bytes both ways, and start-up time is measured", async (runtime) => {
    const echo =
      "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line[::-1].strip() + '\\n'); sys.stdout.flush()";
    const sandbox = await startPython(runtime, sandboxName(engine.label), echo);
    try {
      const writer = sandbox.stdin.getWriter();
      await writer.write(new TextEncoder().encode("abc\n"));
      assert.equal(await firstLine(sandbox), "cba");
      await writer.close();
      assert.equal(await sandbox.exited, 0);
    } finally {
      await sandbox.kill();
    }
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const quick = await startPython(runtime, sandboxName(engine.label), "pass");
      assert.equal(await quick.exited, 0);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    console.log(`${engine.label}: start + python3 -c pass + exit, median of 5: ${Math.round(times[2])} ms`);
  });
}
