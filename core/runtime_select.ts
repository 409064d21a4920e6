/**
 * Picks the sandbox runtime: the one the user named, or with `auto` the first that works here and has
 * the sandbox image, then one without images (the embedded runtime), then any that works (its start
 * then fails with a clear "image missing" error).
 * @module
 */
import { hasImageStore, type RuntimeDetection, type RuntimePlugin } from "./contracts/runtime.ts";
import { log } from "./log.ts";

/** A runtime plugin with what its detection found. */
export interface DetectedRuntime {
  runtime: RuntimePlugin;
  detection: RuntimeDetection;
  /** Whether the image is present (undefined for runtimes without images). */
  hasImage?: boolean;
}

/** Detects every runtime in parallel, keeping the given order. */
export function detectAll(runtimes: RuntimePlugin[], image: string): Promise<DetectedRuntime[]> {
  return Promise.all(runtimes.map(async (runtime) => {
    const detection = await runtime.detect();
    const hasImage = detection.available && hasImageStore(runtime)
      ? await runtime.imageExists(image).catch(() => false)
      : undefined;
    return { runtime, detection, hasImage };
  }));
}

/** Chooses a runtime for `setting` ("auto" or a plugin name); throws a clear error when none works. */
export async function selectRuntime(
  setting: string,
  runtimes: RuntimePlugin[],
  image: string,
): Promise<RuntimePlugin> {
  const candidates = setting === "auto" ? runtimes : runtimes.filter((r) => r.name === setting);
  if (candidates.length === 0) {
    throw new Error(
      `Unknown runtime "${setting}"; choose one of auto, ${runtimes.map((r) => r.name).join(", ")}`,
    );
  }
  const detected = await detectAll(candidates, image);
  const usable = detected.filter((d) => d.detection.available);
  const chosen = usable.find((d) => d.hasImage === true) ?? usable.find((d) => d.hasImage === undefined) ??
    usable[0];
  if (chosen) {
    if (chosen.hasImage === false) {
      log.warn("sandbox image missing", { runtime: chosen.runtime.name, image, fix: "codemode image build" });
    }
    log.info("selected runtime", { runtime: chosen.runtime.name, version: chosen.detection.version });
    return chosen.runtime;
  }
  const reasons = detected.map(({ runtime, detection }) => {
    const problem = detection.problems[0];
    return `${runtime.name}: ${
      problem ? `${problem.message}${problem.fix ? ` (fix: ${problem.fix})` : ""}` : "not available"
    }`;
  });
  throw new Error(`No sandbox runtime is usable (${reasons.join("; ")})`);
}
