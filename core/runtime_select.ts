/**
 * Picks the sandbox runtime: the one the user named, or with `auto` the first that works here (and
 * has the sandbox image, when it uses images).
 * @module
 */
import type { RuntimeDetection, RuntimePlugin } from "./contracts/runtime.ts";
import { log } from "./log.ts";

/** A runtime plugin with what its detection found. */
export interface DetectedRuntime {
  runtime: RuntimePlugin;
  detection: RuntimeDetection;
}

/** Detects every runtime in parallel, keeping the given order. */
export function detectAll(runtimes: RuntimePlugin[]): Promise<DetectedRuntime[]> {
  return Promise.all(runtimes.map(async (runtime) => ({ runtime, detection: await runtime.detect() })));
}

/** Chooses a runtime for `setting` ("auto" or a plugin name); throws a clear error when none works. */
export async function selectRuntime(setting: string, runtimes: RuntimePlugin[]): Promise<RuntimePlugin> {
  const candidates = setting === "auto" ? runtimes : runtimes.filter((r) => r.name === setting);
  if (candidates.length === 0) {
    throw new Error(`Unknown runtime "${setting}"; choose one of auto, ${runtimes.map((r) => r.name).join(", ")}`);
  }
  const detected = await detectAll(candidates);
  const usable = detected.filter((d) => d.detection.available);
  const ready = usable.find((d) => d.detection.problems.length === 0) ?? usable[0];
  if (ready) {
    log.info("selected runtime", { runtime: ready.runtime.name, version: ready.detection.version });
    return ready.runtime;
  }
  const reasons = detected.map(({ runtime, detection }) => {
    const problem = detection.problems[0];
    return `${runtime.name}: ${problem ? `${problem.message}${problem.fix ? ` (fix: ${problem.fix})` : ""}` : "not available"}`;
  });
  throw new Error(`No sandbox runtime is usable (${reasons.join("; ")})`);
}
