/**
 * Picks the sandbox runtime: the one the user named, or with `auto` the first in registration order
 * whose detection says it works here (for container engines that includes having the image and
 * starting a probe container). Detection runs one runtime at a time and stops at the first that works,
 * so a machine with podman never pays for probing the rest.
 * @module
 */
import type { RuntimePlugin } from "../contracts/runtime.ts";
import { log } from "../observe/log.ts";

/** Chooses a runtime for `setting` ("auto" or a plugin name); throws a clear error when none works. */
export async function selectRuntime(setting: string, runtimes: RuntimePlugin[]): Promise<RuntimePlugin> {
  const candidates = setting === "auto" ? runtimes : runtimes.filter((r) => r.name === setting);
  if (candidates.length === 0) {
    throw new Error(
      `Unknown runtime "${setting}"; choose one of auto, ${runtimes.map((r) => r.name).join(", ")}`,
    );
  }
  const reasons: string[] = [];
  for (const runtime of candidates) {
    const detection = await runtime.detect();
    if (detection.available) {
      log.info("selected runtime", { runtime: runtime.name, version: detection.version });
      return runtime;
    }
    const problem = detection.problems[0];
    reasons.push(
      `${runtime.name}: ${
        problem ? `${problem.message}${problem.fix ? ` (fix: ${problem.fix})` : ""}` : "not available"
      }`,
    );
    log.info("runtime not usable", { runtime: runtime.name, problems: detection.problems });
  }
  throw new Error(`No sandbox runtime is usable (${reasons.join("; ")})`);
}
