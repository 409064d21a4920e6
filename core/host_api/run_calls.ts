/**
 * What one run's calls into the host share: the context every call is served with (built once per run,
 * since calls are the hot path), approvals asked with the run's clock stopped, the calls a dry run
 * planned, the run's plans (runtime.plan), and the notes calls leave for the result.
 * @module
 */
import type { RunResult } from "../contracts/output.ts";
import type { Approver } from "./approvals.ts";
import { PlannedCalls } from "./dry_run.ts";
import { RunPlans } from "./plans.ts";
import type { RpcContext } from "./rpc.ts";
import type { RunClock } from "./run_clock.ts";

/** The calls of one run. */
export class RunCalls {
  /** What each call of the run is served with. */
  readonly context: RpcContext;
  #planned = new PlannedCalls();
  #notes = new Set<string>();

  /** Calls of the run in `session`; `approve` asks the user, with `clock` stopped while it waits. */
  constructor(
    session: string,
    run: { signal: AbortSignal; requestId?: string; clock: RunClock; approve?: Approver },
  ) {
    const { signal, clock, approve } = run;
    this.context = {
      session,
      signal,
      requestId: run.requestId,
      ...(approve ? { approve: (request) => clock.during(() => approve(request, signal)) } : {}),
      plan: (call) => this.#planned.add(call),
      note: (text) => void this.#notes.add(text),
      plans: new RunPlans(),
    };
  }

  /** `result` with what the calls added: the dry run's plan and the notes. */
  finish(result: RunResult): RunResult {
    const planNote = this.#planned.note();
    if (planNote) this.#notes.add(planNote);
    const planned = this.#planned.calls;
    if (!planned.length && !this.#notes.size) return result;
    return {
      ...result,
      notes: [...result.notes ?? [], ...this.#notes],
      ...(planned.length ? { plannedCalls: planned } : {}),
    };
  }
}
