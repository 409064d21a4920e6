/**
 * Approvals as the dashboard sees them: every question asked and closed becomes an activity event, the
 * open ones go into the state the serve publishes, and answers given on the page come back through the
 * serve's inbox (read only while a question is open) to `ApprovalBroker.answer()`. The first answer wins:
 * when the page answers first, the broker withdraws the question from the MCP client (its elicitation
 * request is cancelled), and an answer that comes after the question closed is refused and logged.
 * @module
 */
import type { ApprovalBroker, ApprovalEvent } from "../host_api/approvals.ts";
import { activity } from "../observe/activity.ts";
import type { ActivityInbox, InboxMessage } from "../observe/activity_file.ts";
import type { PendingApprovalInfo } from "../observe/serve_state.ts";
import { log } from "../observe/log.ts";

/** Where answers from the dashboard come from, as `ApprovalBroker.answer()` is told. */
export const DASHBOARD = "dashboard";

/** The open questions as the serve publishes them (no message text: the page builds its own). */
export function pendingApprovals(broker: ApprovalBroker): PendingApprovalInfo[] {
  return broker.pending().map((a) => ({
    id: a.id,
    session: a.session,
    ...(a.requestId ? { requestId: a.requestId } : {}),
    ...(a.kind ? { kind: a.kind } : {}),
    server: a.server,
    tool: a.tool,
    summary: a.summary,
    reason: a.reason,
    ...(a.text ? { text: a.text } : {}),
    ...(a.scopes?.length ? { scopes: a.scopes.map((s) => ({ ...s })) } : {}),
    ...(a.fields?.length ? { fields: a.fields.map((f) => ({ name: f.name, required: f.required })) } : {}),
    askedAt: a.askedAt,
    expiresAt: a.expiresAt,
    client: a.client,
    ...(a.plan ? { plan: a.plan } : {}),
  }));
}

/**
 * Records the broker's questions as activity, calls `changed` whenever the open ones change (so the state
 * is published at once), and answers from `inbox` while any question is open. Returns the function that
 * stops all of it.
 */
export function bridgeApprovals(
  broker: ApprovalBroker,
  inbox: ActivityInbox,
  changed: () => void,
): () => void {
  let listening: (() => void) | undefined;
  const unsubscribe = broker.subscribe((event) => {
    record(event);
    if (event.type === "opened") listening ??= inbox.on("approval", (m) => void answerFromInbox(broker, m));
    else if (!broker.pending().length) {
      listening?.();
      listening = undefined;
    }
    changed();
  });
  return () => {
    unsubscribe();
    listening?.();
  };
}

/** Passes one inbox message on to the broker; false (and logged) when it is malformed or too late. */
export function answerFromInbox(broker: ApprovalBroker, message: InboxMessage): boolean {
  const { id, answer, scope } = message;
  const offered = typeof id === "string"
    ? broker.pending().find((a) => a.id === id)?.scopes?.map((s) => s.value) ?? ["once", "session"]
    : [];
  const valid = typeof id === "string" && id.length <= 128 &&
    (answer === "approve" || answer === "decline") &&
    (scope === undefined || (typeof scope === "string" && offered.includes(scope)));
  if (!valid) {
    log.warn("ignored a malformed answer from the dashboard", { id: String(id).slice(0, 128) });
    return false;
  }
  const approve = answer === "approve";
  const ok = broker.answer(id, { approve, ...(approve && scope ? { scope: String(scope) } : {}) }, DASHBOARD);
  if (!ok) {
    log.info("an answer from the dashboard came for a question that is no longer open", { approval: id });
  }
  return ok;
}

function record(event: ApprovalEvent): void {
  if (!activity.enabled) return;
  const a = event.approval;
  const fields = {
    ...(a.requestId ? { run: a.requestId } : {}),
    id: a.id,
    session: a.session,
    ...(a.kind ? { about: a.kind } : {}),
    server: a.server,
    tool: a.tool,
    summary: a.summary,
    reason: a.reason,
    ...(a.plan ? { plan: a.plan } : {}),
  };
  if (event.type === "opened") {
    activity.record({ kind: "approval.asked", ...fields, client: a.client, expiresAt: a.expiresAt });
  } else {
    activity.record({
      kind: "approval.closed",
      ...fields,
      outcome: event.outcome,
      ...(event.scope ? { scope: event.scope } : {}),
      ...(event.via ? { via: event.via } : {}),
    });
  }
}
