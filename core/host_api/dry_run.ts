/**
 * Dry runs: inside `runtime.dry_run()` the sandbox marks its tool calls as dry, and the host, which alone
 * decides from the tool's annotations, runs only the read-only ones. Every other call is recorded here,
 * not made, and answered with None; the run's result lists the recorded calls as `planned_calls`.
 * @module
 */

/** A call a dry run recorded instead of making. */
export interface PlannedCall {
  server: string;
  tool: string;
  arguments: Record<string, unknown>;
}

/** Most calls one run's plan lists, and most characters of arguments it keeps in all. */
export const PLAN_LIMITS = { calls: 1000, argumentChars: 1024 * 1024 } as const;

/** The calls one run planned, bounded: past the limits only the count grows. */
export class PlannedCalls {
  readonly calls: PlannedCall[] = [];
  #chars = 0;
  #unlisted = 0;

  /** Records one call. */
  add(call: PlannedCall): void {
    const chars = JSON.stringify(call.arguments).length;
    if (this.calls.length >= PLAN_LIMITS.calls || this.#chars + chars > PLAN_LIMITS.argumentChars) {
      this.#unlisted++;
      return;
    }
    this.#chars += chars;
    this.calls.push(call);
  }

  /** What the result should say about calls left out of the list, if any were. */
  note(): string | undefined {
    if (!this.#unlisted) return undefined;
    return `${this.#unlisted} more planned call(s) are not listed: a plan keeps at most ${PLAN_LIMITS.calls} ` +
      `calls and ${PLAN_LIMITS.argumentChars} characters of arguments`;
  }
}
