/**
 * How a run ended, as a sandbox session saw it, turned into the result the client gets: the sandbox's
 * own `done` frame, or the host stopping it (deadline passed, cancel ignored, sandbox gone, channel broken).
 * @module
 */
import type { CheckFinding, RunResult } from "../contracts/output.ts";
import type { SandboxFrame } from "./protocol.ts";
import { type OutputBuffer, truncationNote } from "./output_buffer.ts";
import type { DisplayCollector } from "./displays.ts";

/** The sandbox's report that a run ended. */
export type DoneFrame = Extract<SandboxFrame, { type: "done" }>;

/** Why a run ended: its done frame, or what the host saw instead. */
export type RunEnd =
  | DoneFrame
  | { stopped: "deadline" | "cancelled" }
  | { exited: string }
  | { channelFailed: string };

/** What the result is built from besides the end. */
export interface RunRecord {
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  /** Seconds the run took on the host. */
  duration: number;
  timeoutSeconds: number;
  /** The client cancelled the run. */
  cancelled: boolean;
  /** What the run displayed. */
  displays?: DisplayCollector;
}

/** The message of a run the client cancelled and the sandbox interrupted. */
export const CANCELLED =
  "Cancelled by the client: execution was interrupted; globals assigned before that point are kept";

/** What a timed-out run's result says to do instead. */
export const LONGER_WORK =
  "for work longer than a run's timeout, start it in the background with `job = runtime.start_job(work)` " +
  "and collect it in a later run with `await runtime.wait(job)` (runtime.jobs() shows progress), or call " +
  "run_python as an MCP task if the client supports tasks";

/** The result of a run that ended as `end`; host-side ends mean the sandbox was killed. */
export function runResult(end: RunEnd, run: RunRecord): RunResult {
  const shown = run.displays?.result();
  const base = {
    stdout: run.stdout.text(),
    stderr: run.stderr.text(),
    duration: run.duration,
    ...(shown?.displays.length ? { displays: shown.displays } : {}),
  };
  const notes = [
    ...run.stdout.notes("stdout"),
    ...run.stderr.notes("stderr"),
    ...shown?.notes ?? [],
  ];
  if ("stopped" in end) {
    const deadline = end.stopped === "deadline";
    if (deadline) notes.push(LONGER_WORK);
    return {
      ...base,
      status: deadline ? "timeout" : "cancelled",
      error: deadline
        ? `Timed out after ${run.timeoutSeconds}s and did not stop when interrupted; the sandbox was killed`
        : "Cancelled by the client; the run did not stop when interrupted, so the sandbox was killed",
      notes,
      sessionLost: true,
    };
  }
  if ("exited" in end) {
    return {
      ...base,
      status: "error",
      error: `The sandbox ended during the run (${end.exited})`,
      notes,
      sessionLost: true,
    };
  }
  if ("channelFailed" in end) {
    return {
      ...base,
      status: "error",
      error: `The sandbox channel failed: ${end.channelFailed}`,
      sessionLost: true,
    };
  }
  for (const stream of ["stdout", "stderr"] as const) {
    const dropped = end.dropped?.[stream] ?? 0;
    if (dropped > 0 && !run[stream].truncated) notes.push(truncationNote(stream, dropped, run[stream].cap));
  }
  notes.push(...end.notes ?? []);
  // A run that finished before the interrupt landed keeps its result.
  const cancelled = run.cancelled && end.status !== "ok";
  if (end.status === "timeout" && !cancelled) notes.push(LONGER_WORK);
  const check = end.status === "error" ? checkFindings(end.check) : [];
  return {
    ...base,
    status: cancelled ? "cancelled" : end.status,
    ...(end.value !== undefined ? { value: end.value } : {}),
    ...(cancelled ? { error: CANCELLED } : end.error ? { error: end.error } : {}),
    notes,
    ...(check.length ? { check } : {}),
  };
}

/** Most findings a result carries, and characters of each text. */
export const CHECK_LIMITS = { findings: 200, kind: 40, text: 2000 } as const;

/** The pre-run check's findings as the sandbox reported them, checked and capped (the sandbox is untrusted). */
export function checkFindings(raw: unknown[] | undefined): CheckFinding[] {
  const text = (value: unknown, max: number) => typeof value === "string" ? value.slice(0, max) : "";
  const position = (value: unknown) =>
    Number.isSafeInteger(value) && (value as number) >= 0 ? value as number : 0;
  return (raw ?? []).slice(0, CHECK_LIMITS.findings).flatMap((item) => {
    if (!item || typeof item !== "object") return [];
    const f = item as Record<string, unknown>;
    const finding: CheckFinding = {
      line: position(f.line),
      col: position(f.col),
      kind: text(f.kind, CHECK_LIMITS.kind) || "problem",
      message: text(f.message, CHECK_LIMITS.text),
    };
    const fix = text(f.fix, CHECK_LIMITS.text);
    return [fix ? { ...finding, fix } : finding];
  });
}
