/**
 * Picks the sandbox runtime: the one the user named, or with `auto` the first in registration order
 * whose detection says it works here (for container engines that includes having the image and
 * starting a probe container). Detection runs one runtime at a time and stops at the first that works,
 * so a machine with podman never pays for probing the rest. With a {@link DetectionCache}, a runtime's
 * verdict is reused while its fingerprint holds, which skips the probe container. Under
 * `CODEMODE_ISOLATION=gvisor` only gVisor runtimes are candidates: when none works the start fails with
 * their findings, it never falls back to runc or Pyodide.
 * @module
 */
import {
  isolationOf,
  type IsolationSetting,
  type RuntimeDetection,
  type RuntimePlugin,
  servesIsolation,
} from "../contracts/runtime.ts";
import { log } from "../observe/log.ts";
import type { DetectionCache } from "./detection_cache.ts";

/** The runtime chosen, its verdict, and whether that verdict came from the cache. */
export interface RuntimeChoice {
  runtime: RuntimePlugin;
  detection: RuntimeDetection;
  cached: boolean;
}

/**
 * Chooses a runtime for `setting` ("auto" or a plugin name) among those serving `isolation`; throws a clear
 * error when none works.
 */
export async function selectRuntime(
  setting: string,
  runtimes: RuntimePlugin[],
  cache?: DetectionCache,
  isolation: IsolationSetting = "container",
): Promise<RuntimeChoice> {
  const named = setting === "auto" ? runtimes : runtimes.filter((r) => r.name === setting);
  if (named.length === 0) {
    throw new Error(
      `Unknown runtime "${setting}"; choose one of auto, ${runtimes.map((r) => r.name).join(", ")}`,
    );
  }
  const candidates = named.filter((r) => servesIsolation(r, isolation));
  if (candidates.length === 0) {
    throw new Error(
      setting === "auto"
        ? `No registered runtime runs ${isolation} sandboxes (CODEMODE_ISOLATION=${isolation})`
        : `The ${setting} runtime runs ${isolationOf(named[0])} sandboxes, not ${isolation} ones ` +
          `(CODEMODE_ISOLATION=${isolation}); choose another CODEMODE_RUNTIME or CODEMODE_ISOLATION`,
    );
  }
  const reasons: string[] = [];
  for (const runtime of candidates) {
    const { detection, cached } = await detectRuntime(runtime, cache);
    if (detection.available) {
      log.info("selected runtime", { runtime: runtime.name, version: detection.version, cached });
      return { runtime, detection, cached };
    }
    const problem = detection.problems[0];
    reasons.push(
      `${runtime.name}: ${
        problem ? `${problem.message}${problem.fix ? ` (fix: ${problem.fix})` : ""}` : "not available"
      }`,
    );
    log.info("runtime not usable", { runtime: runtime.name, problems: detection.problems, cached });
  }
  const tier = isolation === "gvisor" ? " under gVisor (CODEMODE_ISOLATION=gvisor; no fallback to runc)" : "";
  throw new Error(`No sandbox runtime is usable${tier} (${reasons.join("; ")})`);
}

/**
 * One runtime's verdict: the cached one while the plugin's fingerprint matches (the plugin adopts it),
 * else a fresh detection, which is then cached unless a problem was transient (a timeout). Without a
 * cache or a fingerprint, always fresh.
 */
export async function detectRuntime(
  runtime: RuntimePlugin,
  cache?: DetectionCache,
): Promise<{ detection: RuntimeDetection; cached: boolean }> {
  const fingerprint = cache && runtime.fingerprint
    ? await runtime.fingerprint().catch(() => undefined)
    : undefined;
  if (cache && fingerprint !== undefined) {
    const hit = await cache.get(runtime.name, fingerprint);
    if (hit) {
      runtime.adopt?.(hit);
      return { detection: hit, cached: true };
    }
  }
  const detection = await runtime.detect();
  // A timeout on a busy machine must not keep the runtime out for the hour a negative verdict lasts.
  const lasting = !detection.problems.some((p) => p.transient);
  if (cache && fingerprint !== undefined && lasting) await cache.set(runtime.name, fingerprint, detection);
  return { detection, cached: false };
}

/** Records a verdict detected elsewhere (doctor's), so the next selection can use it. Never throws. */
export async function recordDetection(
  runtime: RuntimePlugin,
  detection: RuntimeDetection,
  cache: DetectionCache,
): Promise<void> {
  const fingerprint = await runtime.fingerprint?.().catch(() => undefined);
  if (fingerprint !== undefined) await cache.set(runtime.name, fingerprint, detection);
}
