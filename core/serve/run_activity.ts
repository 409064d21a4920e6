/**
 * The activity events of a run_python call: its start (the code) and its end (status, duration, output,
 * value, error). What a run produces besides text (displays, artifacts) becomes events of its own kinds
 * here, next to the end event, so the dashboard can give each its panel.
 * @module
 */
import type { RunResult } from "../contracts/output.ts";
import { activity } from "../observe/activity.ts";

/** A run began in `session`. */
export function recordRunStart(run: string, session: string, code: string, timeout: number): void {
  activity.record({ kind: "run.start", run, session, code, timeout });
}

/** A run ended with `result`. */
export function recordRunEnd(run: string, session: string, result: RunResult): void {
  if (!activity.enabled) return;
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
  });
}
