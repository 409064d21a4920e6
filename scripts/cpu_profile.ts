/**
 * A V8 CPU profile of this process around some work, taken over the inspector (Deno and Bun both have
 * it), for the probes that split a call's CPU by stage or by file. The `.cpuprofile` it writes opens in
 * DevTools or speedscope.
 * @module
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";

/** The parts of a V8 CPU profile the probes read. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { url: string; functionName: string } }[];
  samples: number[];
  timeDeltas: number[];
}

/** Samples this process every `intervalUs` while `work` runs; writes the profile to `file` and returns it. */
export async function cpuProfile(
  file: string,
  intervalUs: number,
  work: () => Promise<unknown>,
): Promise<CpuProfile> {
  const stop = await startCpuProfile(intervalUs);
  try {
    await work();
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
  return await stop(file);
}

/**
 * Starts sampling this process every `intervalUs`; the function it returns stops, writes the profile to
 * `file` (when given) and returns it. For profiles that begin and end on events (a serve's signals, its Nth call).
 */
export async function startCpuProfile(intervalUs: number): Promise<(file?: string) => Promise<CpuProfile>> {
  const inspector = new Session();
  inspector.connect();
  const post = <T>(method: string, params?: object) =>
    new Promise<T>((resolve, reject) =>
      inspector.post(method, params ?? {}, (error, result) => error ? reject(error) : resolve(result as T))
    );
  try {
    await post("Profiler.enable");
    await post("Profiler.setSamplingInterval", { interval: intervalUs });
    await post("Profiler.start");
  } catch (error) {
    inspector.disconnect();
    throw error;
  }
  return async (file) => {
    try {
      const { profile } = await post<{ profile: CpuProfile }>("Profiler.stop");
      if (file) writeFileSync(file, JSON.stringify(profile));
      return profile;
    } finally {
      inspector.disconnect();
    }
  };
}
