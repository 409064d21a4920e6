/**
 * The host side of calls the sandbox makes (tool calls, docs, search): the handler type and the error
 * that travels back to the sandbox as a typed exception.
 * @module
 */
import type { ApprovalAnswer, ApprovalRequest } from "./approvals.ts";
import type { PlannedCall } from "./dry_run.ts";
import type { RunPlans } from "./plans.ts";

/** Context of one call from the sandbox. */
export interface RpcContext {
  /** The session the call came from. */
  session: string;
  /** Aborted when the run that made the call ends, is cancelled, or its session is lost. */
  signal: AbortSignal;
  /** The request the run serves (for logs; lines written during the call carry it already). */
  requestId?: string;
  /** Asks the user whether a call may go out (the run's clock stops meanwhile); absent: nobody to ask. */
  approve?: (request: ApprovalRequest) => Promise<ApprovalAnswer>;
  /** Records a call a dry run did not make, for the result's `planned_calls`. */
  plan?: (call: PlannedCall) => void;
  /** Adds a note the run's result carries, once however often it is added (e.g. a skill's drift findings). */
  note?: (text: string) => void;
  /** The run's plans (`runtime.plan`): what their rehearsals recorded and the user approved. */
  plans?: RunPlans;
}

/** Serves one call from the sandbox; the resolved value is sent back as JSON. */
export type RpcHandler = (
  method: string,
  params: Record<string, unknown>,
  context: RpcContext,
) => Promise<unknown>;

export { pythonErrorType, RpcError } from "./rpc_error.ts";
