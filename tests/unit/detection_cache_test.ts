import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RuntimeDetection, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { DETECTION_CACHE_FILE, DetectionCache } from "../../core/sandbox/detection_cache.ts";
import { detectRuntime, recordDetection, selectRuntime } from "../../core/sandbox/runtime_select.ts";

const scratch = mkdtempSync(join(tmpdir(), "codemode-detections-"));
globalThis.addEventListener("unload", () => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const stateDir = () => join(scratch, `state-${++dirs}`);

const works: RuntimeDetection = {
  name: "engine",
  available: true,
  version: "4.3.1",
  rootless: false,
  problems: [],
  facts: { cgroupLimits: false },
};
const broken: RuntimeDetection = {
  name: "engine",
  available: false,
  version: "4.3.1",
  problems: [{ message: "The sandbox image is missing" }],
};

/** A plugin whose fingerprint and verdict the test sets; it counts detections and records adoptions. */
function plugin(name: string, verdict: RuntimeDetection) {
  const state = { fingerprint: "binary /usr/bin/engine 100 1; image sha256:aaa" as string | undefined };
  const calls = { detect: 0, adopted: [] as RuntimeDetection[] };
  const runtime: RuntimePlugin = {
    name,
    detect: () => (calls.detect++, Promise.resolve({ ...verdict, name })),
    fingerprint: () => Promise.resolve(state.fingerprint),
    adopt: (detection) => void calls.adopted.push(detection),
    start: () => Promise.reject(new Error("not in this test")),
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
  };
  return { runtime, state, calls };
}

Deno.test("a verdict is reused while the fingerprint and codemode's version hold", async () => {
  const dir = stateDir();
  const cache = new DetectionCache(dir, "1.0.0");
  await cache.set("podman", "binary a; image x", works);
  assert.deepEqual(await cache.get("podman", "binary a; image x"), works);
  assert.equal(await cache.get("podman", "binary b; image x"), undefined, "the engine binary changed");
  assert.equal(await cache.get("podman", "binary a; image none"), undefined, "the image was removed");
  assert.equal(await cache.get("docker", "binary a; image x"), undefined);
  assert.equal(await new DetectionCache(dir, "1.0.1").get("podman", "binary a; image x"), undefined);
  assert.equal(statSync(join(dir, DETECTION_CACHE_FILE)).mode & 0o777, 0o600);
  await cache.drop("podman");
  assert.equal(await cache.get("podman", "binary a; image x"), undefined);
});

Deno.test("a 'does not work' verdict expires after an hour; a 'works' verdict does not", async () => {
  let now = 1_000_000;
  const cache = new DetectionCache(stateDir(), "1.0.0", { now: () => now });
  await cache.set("podman", "k", broken);
  await cache.set("docker", "k", works);
  now += 59 * 60 * 1000;
  assert.deepEqual(await cache.get("podman", "k"), broken);
  now += 2 * 60 * 1000;
  assert.equal(await cache.get("podman", "k"), undefined);
  assert.deepEqual(await cache.get("docker", "k"), works);
});

Deno.test("a damaged cache file reads as empty and is rewritten", async () => {
  const dir = stateDir();
  const cache = new DetectionCache(dir, "1.0.0");
  await cache.set("podman", "k", works);
  writeFileSync(join(dir, DETECTION_CACHE_FILE), "{ not json");
  assert.equal(await cache.get("podman", "k"), undefined);
  await cache.set("podman", "k", works);
  assert.ok(JSON.parse(readFileSync(join(dir, DETECTION_CACHE_FILE), "utf8")).entries.podman);
});

Deno.test("selection detects once, then adopts the cached verdict until the fingerprint changes", async () => {
  const cache = new DetectionCache(stateDir(), "1.0.0");
  const engine = plugin("podman", works);
  const first = await selectRuntime("auto", [engine.runtime], cache);
  assert.equal(first.cached, false);
  assert.equal(engine.calls.detect, 1);

  const again = await selectRuntime("auto", [engine.runtime], cache);
  assert.equal(again.cached, true);
  assert.equal(engine.calls.detect, 1, "no second detection");
  assert.equal(engine.calls.adopted.length, 1);
  assert.deepEqual(engine.calls.adopted[0].facts, { cgroupLimits: false }, "facts survive the cache");

  engine.state.fingerprint = "binary /usr/bin/engine 200 2; image sha256:aaa";
  assert.equal((await selectRuntime("auto", [engine.runtime], cache)).cached, false);
  assert.equal(engine.calls.detect, 2);

  // No fingerprint (the engine can't tell now): always detected, nothing cached.
  engine.state.fingerprint = undefined;
  assert.equal((await detectRuntime(engine.runtime, cache)).cached, false);
  assert.equal((await detectRuntime(engine.runtime, cache)).cached, false);
  assert.equal(engine.calls.detect, 4);
});

Deno.test("auto skips a runtime with a cached 'does not work' verdict without detecting it", async () => {
  const cache = new DetectionCache(stateDir(), "1.0.0");
  const podman = plugin("podman", broken);
  const pyodide = plugin("pyodide", { ...works, facts: undefined });
  assert.equal(
    (await selectRuntime("auto", [podman.runtime, pyodide.runtime], cache)).runtime.name,
    "pyodide",
  );
  const again = await selectRuntime("auto", [podman.runtime, pyodide.runtime], cache);
  assert.equal(again.runtime.name, "pyodide");
  assert.equal(again.cached, true);
  assert.equal(podman.calls.detect, 1);
  assert.equal(podman.calls.adopted.length, 1);
  await cache.drop("podman");
  await selectRuntime("auto", [podman.runtime, pyodide.runtime], cache);
  assert.equal(podman.calls.detect, 2, "a dropped verdict is detected afresh");
});

Deno.test("recordDetection() stores a verdict found elsewhere (doctor's) under the plugin's fingerprint", async () => {
  const cache = new DetectionCache(stateDir(), "1.0.0");
  const engine = plugin("podman", works);
  await recordDetection(engine.runtime, { ...works, name: "podman" }, cache);
  assert.equal((await selectRuntime("podman", [engine.runtime], cache)).cached, true);
  assert.equal(engine.calls.detect, 0);
});

Deno.test("a verdict that failed on a timeout (a busy machine) is not cached: the next selection asks again", async () => {
  const cache = new DetectionCache(stateDir(), "1.0.0");
  const slow = plugin("podman", {
    ...broken,
    problems: [{ message: "podman did not answer within 15 s", transient: true }],
  });
  await assert.rejects(selectRuntime("podman", [slow.runtime], cache), /did not answer within 15 s/);
  await assert.rejects(selectRuntime("podman", [slow.runtime], cache));
  assert.equal(slow.calls.detect, 2, "detected afresh");
  assert.equal(await cache.get("podman", slow.state.fingerprint!), undefined);
});
