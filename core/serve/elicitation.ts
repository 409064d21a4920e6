/**
 * Approval questions as MCP elicitation: a form (`elicitation/create`, mode "form") with a boolean
 * `approve` and a `scope` of "once" or "session" (or the scopes the request offers, none for a plan, and a
 * text field for each value it asks for), sent as part of the `run_python` request whose code made the
 * call, so it reaches that client and, over HTTP, that session's stream and no other.
 * @module
 */
import type {
  ClientCapabilities,
  ElicitRequestFormParams,
  ElicitResult,
  Server,
  ServerContext,
} from "@modelcontextprotocol/server";
import type {
  ApprovalBroker,
  ApprovalDecision,
  Approver,
  Ask,
  PendingApproval,
} from "../host_api/approvals.ts";

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

/** Most characters taken from one filled-in field. */
const MAX_VALUE = 4096;

/**
 * The form of `question`: the call form, or one with the request's scopes (none: approve or not, as for a
 * plan) and a text field per value it asks for. Fields are not `required` in the schema, so a person can
 * refuse without filling them in; the requester refuses an approval that leaves a required one empty.
 */
export function approvalForm(question: Pick<PendingApproval, "scopes" | "fields">): typeof APPROVAL_FORM {
  if (question.scopes === undefined && !question.fields?.length) return APPROVAL_FORM;
  const properties: Record<string, unknown> = {
    approve: {
      type: "boolean",
      title: "Approve",
      description: "Go ahead; otherwise sandbox code gets a PermissionError",
      default: false,
    },
  };
  if (question.scopes?.length) {
    properties.scope = {
      type: "string",
      title: "For",
      oneOf: question.scopes.map((s) => ({ const: s.value, title: s.title })),
      default: question.scopes[0].value,
    };
  }
  for (const field of question.fields ?? []) {
    properties[field.name] = {
      type: "string",
      title: field.title,
      ...(field.description ? { description: field.description } : {}),
      ...(field.default !== undefined ? { default: field.default } : {}),
      ...(field.choices?.length ? { enum: field.choices } : {}),
    };
  }
  return { type: "object", properties, required: ["approve"] } as typeof APPROVAL_FORM;
}
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
        { mode: "form", message: question.message, requestedSchema: approvalForm(question) },
        { signal, timeout },
      ),
      question,
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

/**
 * The person's decision in a form's answer: only `accept` with `approve: true` approves; the scope is one
 * the question offered, and the values are the text fields it asked for (nothing else is taken).
 */
export function decisionOf(
  result: ElicitResult,
  question?: Pick<PendingApproval, "scopes" | "fields">,
): ApprovalDecision | "cancelled" {
  if (result.action === "cancel") return "cancelled";
  if (result.action !== "accept") return { approve: false };
  const content = (result.content ?? {}) as Record<string, unknown>;
  const scopes = question?.scopes?.map((s) => s.value) ?? ["once", "session"];
  const scope = typeof content.scope === "string" && scopes.includes(content.scope)
    ? content.scope
    : scopes[0];
  const values: Record<string, string> = {};
  for (const field of question?.fields ?? []) {
    const value = content[field.name];
    if (typeof value === "string") values[field.name] = value.slice(0, MAX_VALUE + 1);
  }
  return { approve: content.approve === true, scope, ...(question?.fields?.length ? { values } : {}) };
}
