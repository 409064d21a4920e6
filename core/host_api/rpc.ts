/**
 * The host side of calls the sandbox makes (tool calls, docs, search): the handler type and the error
 * that travels back to the sandbox as a typed exception.
 * @module
 */
import type { ApprovalAnswer, ApprovalRequest } from "./approvals.ts";
import type { PlannedCall } from "./dry_run.ts";

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
}

/** Serves one call from the sandbox; the resolved value is sent back as JSON. */
export type RpcHandler = (
  method: string,
  params: Record<string, unknown>,
  context: RpcContext,
) => Promise<unknown>;

/** An error that reaches sandbox code as an exception of the named Python type (e.g. "ToolError"). */
export class RpcError extends Error {
  /** Creates an error raised in the sandbox as `pythonType`. */
  constructor(readonly pythonType: string, message: string) {
    super(message);
    this.name = "RpcError";
  }
}

/** The Python exception type an error should surface as. */
export function pythonErrorType(error: unknown): string {
  if (error instanceof RpcError) return error.pythonType;
  if (error instanceof Error && error.name === "ToolError") return "ToolError";
  if (error instanceof Error && error.name === "UpstreamTimeoutError") return "TimeoutError";
  // A remote server that needs `codemode auth login`: no retry from sandbox code can fix it.
  if (error instanceof Error && error.name === "UpstreamAuthError") return "PermissionError";
  return "RuntimeError";
}
