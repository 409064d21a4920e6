/**
 * Approval questions as MCP elicitation: a form (`elicitation/create`, mode "form") with a boolean
 * `approve` and a `scope` of "once" or "session", sent as part of the `run_python` request whose code
 * made the call, so it reaches that client and, over HTTP, that session's stream and no other.
 * @module
 */
import type {
  ClientCapabilities,
  ElicitRequestFormParams,
  ElicitResult,
  Server,
  ServerContext,
} from "@modelcontextprotocol/server";
import type { ApprovalBroker, ApprovalDecision, Approver, Ask } from "../host_api/approvals.ts";

/** The form of an approval question. */
export const APPROVAL_FORM: ElicitRequestFormParams["requestedSchema"] = {
  type: "object",
  properties: {
    approve: {
      type: "boolean",
      title: "Approve",
      description: "Let this call go out; otherwise sandbox code gets a PermissionError",
      default: false,
    },
    scope: {
      type: "string",
      title: "For",
      oneOf: [
        { const: "once", title: "This call only" },
        { const: "session", title: "This tool, for the rest of the session" },
      ],
      default: "once",
    },
  },
  required: ["approve"],
};

/** The form of a plan's question: one answer for the whole plan (never "for the session"). */
export const PLAN_FORM: ElicitRequestFormParams["requestedSchema"] = {
  type: "object",
  properties: {
    approve: {
      type: "boolean",
      title: "Approve the plan",
      description: "Let exactly the listed calls go out; otherwise sandbox code gets a PermissionError",
      default: false,
    },
  },
  required: ["approve"],
};

/** Whether a client that declared `capabilities` can be asked with a form (an empty `elicitation` counts). */
export function canAskForm(capabilities: ClientCapabilities | undefined): boolean {
  const elicitation = capabilities?.elicitation as Record<string, unknown> | undefined;
  if (!elicitation || typeof elicitation !== "object") return false;
  // Before modes existed, `elicitation: {}` meant forms; with modes, the form mode must be declared.
  return "form" in elicitation || !("url" in elicitation);
}

/**
 * How one `run_python` request asks its client, or undefined when the client declared no form
 * elicitation (its calls that need approval then follow CODEMODE_CONFIRM_FALLBACK).
 */
export function elicitationAsk(
  capabilities: ClientCapabilities | undefined,
  elicitInput: ServerContext["mcpReq"]["elicitInput"],
  timeoutSeconds: number,
): Ask | undefined {
  if (!canAskForm(capabilities)) return undefined;
  // The broker times the question out; the request's own timeout only has to outlast it.
  const timeout = timeoutSeconds * 1000 + 60_000;
  return async (question, signal) =>
    decisionOf(
      await elicitInput(
        {
          mode: "form",
          message: question.message,
          requestedSchema: question.plan ? PLAN_FORM : APPROVAL_FORM,
        },
        { signal, timeout },
      ),
    );
}

/** The approver of one `run_python` request of `session`: its questions go to this request's client. */
export function requestApprover(
  broker: ApprovalBroker,
  session: string,
  requestId: string,
  server: Server,
  ctx: ServerContext,
): Approver {
  const ask = elicitationAsk(
    server.getClientCapabilities(),
    ctx.mcpReq.elicitInput,
    broker.options.timeoutSeconds,
  );
  return broker.approver(session, requestId, ask);
}

/** The person's decision in a form's answer: only `accept` with `approve: true` approves. */
export function decisionOf(result: ElicitResult): ApprovalDecision | "cancelled" {
  if (result.action === "cancel") return "cancelled";
  if (result.action !== "accept") return { approve: false };
  const content = (result.content ?? {}) as Record<string, unknown>;
  return { approve: content.approve === true, scope: content.scope === "session" ? "session" : "once" };
}
