/**
 * Approvals as the dashboard sees them, with a real inbox in a temporary state dir: each question asked
 * and closed is an activity event, an answer left in the inbox settles the question and withdraws the
 * client's form, and answers that are malformed, late or for unknown questions change nothing.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApprovalBroker, type Ask } from "../../core/host_api/approvals.ts";
import { activity, type ActivityEvent } from "../../core/observe/activity.ts";
import { ActivityInbox, sendToInbox } from "../../core/observe/activity_file.ts";
import { ensurePrivateDir } from "../../core/observe/private_files.ts";
import { answerFromInbox, bridgeApprovals, pendingApprovals } from "../../core/serve/approval_activity.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const request = { server: "memory", tool: "delete_entities", summary: 'entityNames=["a"]', reason: "asked" };

async function world() {
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-approval-activity-"));
  const inbox = new ActivityInbox(stateDir, { intervalMs: 20 });
  await ensurePrivateDir(inbox.dir);
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  const events: ActivityEvent[] = [];
  const listen = activity.subscribe((e) => events.push(e));
  let changes = 0;
  const stop = bridgeApprovals(broker, inbox, () => changes++);
  let withdrawn = false;
  const neverAnswers: Ask = (_q, signal) =>
    new Promise((resolve) =>
      signal.addEventListener("abort", () => (withdrawn = true, resolve("cancelled")))
    );
  return {
    stateDir,
    inbox,
    broker,
    events,
    changes: () => changes,
    withdrawn: () => withdrawn,
    approve: broker.approver("stdio", "run-1", neverAnswers),
    close() {
      stop();
      listen();
    },
  };
}

Deno.test("an answer left in the serve's inbox settles the open question and withdraws the client's form", async () => {
  const w = await world();
  try {
    const call = w.approve(request, new AbortController().signal);
    await sleep(10);
    const [open] = pendingApprovals(w.broker);
    assert.deepEqual(
      { ...open, id: "x", askedAt: "t", expiresAt: "t" },
      {
        id: "x",
        session: "stdio",
        requestId: "run-1",
        server: "memory",
        tool: "delete_entities",
        summary: 'entityNames=["a"]',
        reason: "asked",
        askedAt: "t",
        expiresAt: "t",
        client: true,
      },
    );
    await sendToInbox(w.stateDir, process.pid, {
      kind: "approval",
      id: open.id,
      answer: "approve",
      from: "dashboard",
    });
    assert.deepEqual(await call, { approved: true, outcome: "approved" });
    assert.equal(w.withdrawn(), true, "the client's elicitation was withdrawn");
    assert.deepEqual(readdirSync(w.inbox.dir), [], "the message was used once");
    const kinds = w.events.map((e) => e.kind);
    assert.deepEqual(kinds, ["approval.asked", "approval.closed"]);
    const closed = w.events[1] as Extract<ActivityEvent, { kind: "approval.closed" }>;
    assert.deepEqual([closed.run, closed.outcome, closed.via], ["run-1", "approved", "dashboard"]);
    assert.equal(w.changes(), 2, "the state is published when the question opens and when it closes");
    // No question open: the inbox is not read, so a message waits there untouched.
    await sendToInbox(w.stateDir, process.pid, { kind: "approval", id: open.id, answer: "decline" });
    await sleep(100);
    assert.equal(readdirSync(w.inbox.dir).length, 1);
  } finally {
    w.close();
  }
});

Deno.test("answers that are malformed, late or for an unknown question are refused and change nothing", async () => {
  const w = await world();
  try {
    const call = w.approve(request, new AbortController().signal);
    await sleep(10);
    const [open] = w.broker.pending();
    for (
      const bad of [
        { kind: "approval", id: open.id, answer: "yes" },
        { kind: "approval", id: open.id, answer: "approve", scope: "forever" },
        { kind: "approval", id: 7, answer: "approve" },
        { kind: "approval", id: "x".repeat(200), answer: "approve" },
        { kind: "approval", id: "not-a-question", answer: "approve" },
      ]
    ) {
      assert.equal(answerFromInbox(w.broker, bad), false, JSON.stringify(bad).slice(0, 80));
    }
    assert.equal(w.broker.pending().length, 1, "still open");
    assert.equal(answerFromInbox(w.broker, { kind: "approval", id: open.id, answer: "decline" }), true);
    assert.equal((await call).outcome, "declined");
    assert.equal(
      answerFromInbox(w.broker, { kind: "approval", id: open.id, answer: "approve" }),
      false,
      "late",
    );
    assert.equal(existsSync(w.inbox.dir), true);
  } finally {
    w.close();
  }
});
