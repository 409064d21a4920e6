/**
 * A sandbox killed while the engine binary is gone keeps running under conmon; the podman plugin must
 * remove it once the binary is back: by itself on its retry timer, and when flushed at shutdown.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RuntimePlugin, SandboxProcess } from "../../core/contracts/runtime.ts";
import { execCli } from "../../plugins/runtime/_oci_exec.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";

const usable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED pending removal tests: podman or image ${TEST_IMAGE} missing`);

// Ignores SIGINT and never yields: only the engine can stop it.
const SPIN = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ready', flush=True)\n" +
  "while True: pass";

/** A podman plugin whose engine CLI is a wrapper script the test can remove and restore. */
function wrapped() {
  const dir = mkdtempSync(join(tmpdir(), "codemode-test-engine-"));
  const wrapper = join(dir, "podman");
  const real = execFileSync("sh", ["-c", "command -v podman"], { encoding: "utf8" }).trim();
  const restore = () => {
    writeFileSync(wrapper, `#!/bin/sh\nexec ${real} "$@"\n`);
    chmodSync(wrapper, 0o755);
  };
  restore();
  return {
    runtime: podman({ command: [wrapper] }),
    restore,
    remove: () => rmSync(wrapper, { force: true }),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const exists = async (name: string) => (await execCli(["podman", "container", "exists", name])).code === 0;

async function spinning(runtime: RuntimePlugin, name: string): Promise<SandboxProcess> {
  const sandbox = await runtime.start({
    name,
    image: TEST_IMAGE,
    command: ["python3", "-c", SPIN],
    limits: { memory: "128m", pids: 16 },
    labels: { "codemode.test": "pending_removal" },
  });
  const { value } = await sandbox.stdout.getReader().read();
  assert.match(new TextDecoder().decode(value), /ready/);
  return sandbox;
}

/** Starts a spinning sandbox, kills it with the engine binary gone, and checks it is still running. */
async function killedWithoutEngine(engine: ReturnType<typeof wrapped>, name: string): Promise<void> {
  const sandbox = await spinning(engine.runtime, name);
  engine.remove();
  await sandbox.kill();
  assert.equal(await exists(name), true, "the container stopped without the engine; nothing to test");
}

function pendingTest(name: string, fn: (engine: ReturnType<typeof wrapped>, name: string) => Promise<void>) {
  Deno.test({
    name,
    ignore: !usable,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const engine = wrapped();
      const container = `codemode-test-pending-${randomBytes(4).toString("hex")}`;
      try {
        await fn(engine, container);
      } finally {
        await execCli(["podman", "rm", "-f", "-t", "0", container]);
        engine.dispose();
      }
    },
  });
}

pendingTest(
  "a sandbox killed while the engine binary is gone is removed by the retry timer once it is back",
  async (engine, name) => {
    await killedWithoutEngine(engine, name);
    engine.restore();
    // No call into the plugin: only its own timer can remove the container.
    const deadline = Date.now() + 30_000;
    while (await exists(name) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    assert.equal(await exists(name), false, "the container outlived its kill once the engine was back");
  },
);

pendingTest(
  "a shutdown flush keeps to its bound while the engine is gone and removes the sandbox once it is back",
  async (engine, name) => {
    await killedWithoutEngine(engine, name);
    assert.ok(engine.runtime.settle, "the podman plugin has no settle()");
    assert.equal(await engine.runtime.settle(500), false);
    assert.equal(await exists(name), true);
    engine.restore();
    assert.equal(await engine.runtime.settle(20_000), true);
    assert.equal(await exists(name), false, "settle() said done but the container is there");
  },
);
