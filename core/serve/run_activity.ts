/**
 * The activity events of a run_python call: its start (the code) and its end (status, duration, output,
 * value, error, and what it produced besides text: its displays, with the bytes of its images handed to
 * the publisher beside the event, and its artifacts).
 * @module
 */
import { Buffer } from "node:buffer";
import type { RunResult } from "../contracts/output.ts";
import { activity, type DisplayEntry } from "../observe/activity.ts";
import { currentLogScope } from "../observe/log.ts";

/** A run began in `session` (in its log scope: the run's trace id, while tracing is on, goes with it). */
export function recordRunStart(run: string, session: string, code: string, timeout: number): void {
  const traceId = currentLogScope()?.traceId;
  activity.record({ kind: "run.start", run, session, code, timeout, ...(traceId ? { traceId } : {}) });
}

/** A run ended with `result`. */
export function recordRunEnd(run: string, session: string, result: RunResult): void {
  if (!activity.enabled) return;
  const images = new Map<number, Uint8Array>();
  const displays = result.displays?.map((d, index): DisplayEntry => {
    if (d.data !== undefined) images.set(index, Buffer.from(d.data, "base64"));
    return {
      mimeType: d.mimeType,
      size: d.size,
      ...(d.text !== undefined ? { text: d.text } : {}),
      ...(d.dropped ? { dropped: true } : {}),
    };
  });
  activity.record({
    kind: "run.end",
    run,
    session,
    status: result.status,
    ms: Math.round(result.duration * 100_000) / 100,
    stdout: result.stdout,
    stderr: result.stderr,
    ...(result.value !== undefined ? { value: result.value } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
    ...(result.notes?.length ? { notes: result.notes } : {}),
    ...(result.sessionLost ? { sessionLost: true } : {}),
    ...(displays?.length ? { displays } : {}),
    ...(result.artifacts?.length
      ? {
        artifacts: result.artifacts.map(({ uri, name, mimeType, size }) => ({ uri, name, mimeType, size })),
      }
      : {}),
  }, images.size ? { images } : undefined);
}
