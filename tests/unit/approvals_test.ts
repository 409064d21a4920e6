/**
 * The approval logic with fakes: the policy's confirm rules, the broker (order, one question at a time
 * per session, session scope, timeouts, answers by id, events, fallback), the question's argument
 * summary (truncated, secrets redacted), the elicitation form's reading, and the run clock's pause.
 */
import assert from "node:assert/strict";
import { mayChangeThings, Policy } from "../../core/config/policy.ts";
import {
  ApprovalBroker,
  type ApprovalDecision,
  type ApprovalEvent,
  type ApprovalRequest,
  type Ask,
  type PendingApproval,
  summarizeArguments,
} from "../../core/host_api/approvals.ts";
import { RunClock } from "../../core/host_api/run_clock.ts";
import { PLAN_LIMITS, PlannedCalls } from "../../core/host_api/dry_run.ts";
import { APPROVAL_FORM, canAskForm, decisionOf } from "../../core/serve/elicitation.ts";
import { stats } from "../../core/observe/stats.ts";
import { REDACTED } from "../../core/upstream/redact.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const request = (tool: string, server = "fs"): ApprovalRequest => ({
  server,
  tool,
  summary: 'path="/tmp/x"',
  reason: 'CODEMODE_CONFIRM_TOOLS has "fs/*"',
});
const live = () => new AbortController().signal;

/** An Ask that records questions and answers each with `decide` after `ms`, counting overlaps. */
function recordingAsk(decide: (q: PendingApproval) => ApprovalDecision | "cancelled", ms = 5) {
  const asked: PendingApproval[] = [];
  let open = 0;
  let most = 0;
  const ask: Ask = async (question) => {
    asked.push(question);
    most = Math.max(most, ++open);
    await sleep(ms);
    open--;
    return decide(question);
  };
  return { ask, asked, most: () => most };
}

Deno.test("confirm globs and confirmDestructive name the rule that asks; deny still comes first", () => {
  const policy = new Policy(
    { confirm: ["fs/write_*"], denyTools: ["fs/write_secret"] },
    { confirm: "/home/me/codemode.yaml" },
  );
  assert.equal(policy.asksApproval, true);
  assert.equal(policy.open, false, "denyTools still refuses");
  assert.equal(
    policy.approvalReason("fs", "write_file"),
    'confirm in /home/me/codemode.yaml has "fs/write_*"',
  );
  assert.equal(policy.approvalReason("fs", "read_file", { readOnlyHint: false }), undefined);
  assert.equal(
    policy.allowsTool("fs", "write_secret").ok,
    false,
    "a denied tool is refused before any question",
  );

  const destructive = new Policy({ confirmDestructive: true });
  assert.equal(destructive.open, true, "approvals ask; they refuse nothing");
  assert.match(
    destructive.approvalReason("m", "delete", { destructiveHint: true }) ?? "",
    /CODEMODE_CONFIRM_DESTRUCTIVE/,
  );
  assert.ok(destructive.approvalReason("m", "plain"), "an unannotated tool may be destructive");
  assert.equal(destructive.approvalReason("m", "read", { readOnlyHint: true }), undefined);
  assert.equal(
    destructive.approvalReason("m", "create", { readOnlyHint: false, destructiveHint: false }),
    undefined,
  );
  assert.equal(new Policy().asksApproval, false);
  assert.deepEqual(
    [undefined, {}, { readOnlyHint: true, destructiveHint: true }, { destructiveHint: false }].map(
      mayChangeThings,
    ),
    [true, true, false, false],
  );
});

Deno.test("questions of one session are asked one at a time, in the order the calls came", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  const { ask, asked, most } = recordingAsk(() => ({ approve: true }));
  const approve = broker.approver("s1", "req-1", ask);
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => approve(request(`t${i}`), live())));
  assert.deepEqual(answers.map((a) => a.outcome), Array(6).fill("approved"));
  assert.deepEqual(asked.map((q) => q.tool), ["t0", "t1", "t2", "t3", "t4", "t5"]);
  assert.equal(most(), 1, "never two questions at once");
  assert.equal(asked[0].requestId, "req-1");
  assert.equal(asked[0].session, "s1");
  assert.match(asked[0].message, /"t0" of the MCP server "fs"[\s\S]*path="\/tmp\/x"[\s\S]*Asked because/);
  assert.match(asked[0].message, /No answer within 5 seconds counts as declined\.$/);
});

Deno.test("different sessions are asked independently, each through its own asker", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  // Each client answers only once both questions are open: serialised sessions would never get there.
  let arrived = 0;
  let bothOpen!: () => void;
  const together = new Promise<void>((resolve) => (bothOpen = resolve));
  const client = (approve: boolean): Ask => async () => {
    if (++arrived === 2) bothOpen();
    const open = await Promise.race([together.then(() => true), sleep(3000).then(() => false)]);
    return { approve: approve && open };
  };
  const [yes, no] = await Promise.all([
    broker.approver("a", undefined, client(true))(request("x"), live()),
    broker.approver("b", undefined, client(false))(request("x"), live()),
  ]);
  assert.equal(arrived, 2);
  assert.deepEqual([yes.approved, no.approved], [true, false], "both questions were open at once");
  assert.equal(no.message, 'Call to "fs/x" declined by the user');
});

Deno.test("scope session approves the tool for the rest of the session only: asked once for ten calls", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  const { ask, asked } = recordingAsk(() => ({ approve: true, scope: "session" }));
  const approve = broker.approver("s", undefined, ask);
  const answers = await Promise.all(Array.from({ length: 10 }, () => approve(request("write"), live())));
  assert.equal(asked.length, 1);
  assert.deepEqual(answers.map((a) => a.approved), Array(10).fill(true));
  assert.deepEqual(answers.slice(1).map((a) => a.outcome), Array(9).fill("remembered"));
  await broker.approver("s", undefined, ask)(request("other"), live());
  assert.equal(asked.length, 2, "another tool is asked about");
  await broker.approver("t", undefined, ask)(request("write"), live());
  assert.equal(asked.length, 3, "another session is asked");
  broker.forget("s");
  await broker.approver("s", undefined, ask)(request("write"), live());
  assert.equal(asked.length, 4, "a forgotten session starts over");
});

Deno.test("decline, cancel, a timeout and a failing client all refuse the call with a clear message", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 0.2, fallback: "deny" });
  const before = (await stats.snapshot()).approvals;
  const declined = await broker.approver("d", undefined, () => Promise.resolve({ approve: false }))(
    request("w"),
    live(),
  );
  assert.deepEqual(declined, {
    approved: false,
    outcome: "declined",
    message: 'Call to "fs/w" declined by the user',
  });
  const cancelled = await broker.approver("c", undefined, () => Promise.resolve("cancelled" as const))(
    request("w"),
    live(),
  );
  assert.equal(cancelled.outcome, "cancelled");
  assert.match(cancelled.message!, /declined by the user: the question was dismissed/);
  let stopped = false;
  const never: Ask = (_q, signal) =>
    new Promise((_resolve, reject) =>
      signal.addEventListener("abort", () => (stopped = true, reject(signal.reason)))
    );
  const timedOut = await broker.approver("t", undefined, never)(request("w"), live());
  assert.equal(timedOut.outcome, "timeout");
  assert.match(timedOut.message!, /declined by the user: no answer within 0.2s \(CODEMODE_CONFIRM_TIMEOUT\)/);
  assert.ok(stopped, "the client was told to stop asking");
  const failing = await broker.approver("f", undefined, () => Promise.reject(new Error("connection closed")))(
    request("w"),
    live(),
  );
  assert.equal(failing.approved, false);
  const after = (await stats.snapshot()).approvals;
  assert.equal(after.asked - before.asked, 4);
  assert.equal(after.declined - before.declined, 3);
  assert.equal(after.timedOut - before.timedOut, 1);
});

Deno.test("after a question of a run times out, the run's later questions are declined without asking", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 0.1, fallback: "deny" });
  let asked = 0;
  const never: Ask = () => (asked++, new Promise(() => {}));
  const approve = broker.approver("s", undefined, never);
  const answers = await Promise.all([1, 2, 3].map(() => approve(request("w"), live())));
  assert.equal(asked, 1);
  assert.deepEqual(answers.map((a) => a.outcome), ["timeout", "timeout", "timeout"]);
  assert.match(answers[2].message!, /an earlier question of this run got no answer/);
  // A new run of the same session asks again.
  await broker.approver("s", undefined, never)(request("w"), live());
  assert.equal(asked, 2);
});

Deno.test("pending() lists the open question, answer() settles it by id, and events say when it opens and closes", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  const events: ApprovalEvent[] = [];
  const stop = broker.subscribe((e) => events.push(e));
  broker.subscribe(() => {
    throw new Error("a broken listener");
  });
  let clientStopped = false;
  const slowClient: Ask = (_q, signal) =>
    new Promise((resolve) =>
      signal.addEventListener("abort", () => (clientStopped = true, resolve("cancelled")))
    );
  const approve = broker.approver("web", "r1", slowClient);
  const first = approve(request("one"), live());
  const second = approve(request("two"), live());
  await sleep(10);
  const open = broker.pending();
  assert.deepEqual(
    open.map((q) => q.tool),
    ["one"],
    "one open question per session; the next waits its turn",
  );
  assert.equal(broker.answer("no-such-id", { approve: true }), false);
  assert.equal(open[0].client, true);
  assert.equal(broker.answer(open[0].id, { approve: true, scope: "session" }), true);
  assert.equal(broker.answer(open[0].id, { approve: false }), false, "the first answer wins");
  assert.deepEqual(await first, { approved: true, outcome: "approved" });
  assert.ok(clientStopped, "the client's question was withdrawn");
  await sleep(10);
  assert.deepEqual(broker.pending().map((q) => q.tool), ["two"]);
  broker.answer(broker.pending()[0].id, { approve: false });
  assert.equal((await second).approved, false);
  assert.deepEqual(broker.pending(), []);
  assert.deepEqual(
    events.map((
      e,
    ) => [
      e.type,
      e.approval.tool,
      e.type === "closed" ? e.outcome : "",
      e.type === "closed" ? e.scope ?? "" : "",
    ]),
    [
      ["opened", "one", "", ""],
      ["closed", "one", "approved", "session"],
      ["opened", "two", "", ""],
      ["closed", "two", "declined", ""],
    ],
  );
  stop();
  await approve(request("one"), live());
  assert.equal(events.length, 4, "an unsubscribed listener hears nothing, and 'one' was remembered");
});

Deno.test("the end of the run withdraws its open and queued questions", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" });
  const run = new AbortController();
  const { ask, asked } = recordingAsk(() => ({ approve: true }), 200);
  const approve = broker.approver("s", undefined, ask);
  const calls = [approve(request("a"), run.signal), approve(request("b"), run.signal)];
  await sleep(20);
  run.abort();
  const answers = await Promise.all(calls);
  assert.deepEqual(answers.map((a) => a.outcome), ["cancelled", "cancelled"]);
  assert.match(answers[0].message!, /the run ended before the user answered/);
  assert.equal(asked.length, 1, "the queued question was never put");
  assert.deepEqual(broker.pending(), []);
});

Deno.test("a client that cannot be asked gets the fallback: deny by default, or allow with a note", async () => {
  const deny = await new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny" }).approver("s")(
    request("w"),
    live(),
  );
  assert.equal(deny.approved, false);
  assert.equal(deny.outcome, "unavailable");
  assert.match(
    deny.message!,
    /needs the user's approval \(CODEMODE_CONFIRM_TOOLS has "fs\/\*"\), and this client cannot ask/,
  );
  assert.match(deny.message!, /CODEMODE_CONFIRM_FALLBACK=allow/);
  const allow = await new ApprovalBroker({ timeoutSeconds: 5, fallback: "allow" }).approver("s")(
    request("w"),
    live(),
  );
  assert.equal(allow.approved, true);
  assert.match(allow.message!, /"fs\/w" ran without approval/);
});

Deno.test("a client that cannot be asked waits for an answer from a watching dashboard under fallback deny", async () => {
  let watching = true;
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny", watched: () => watching });
  const events: ApprovalEvent[] = [];
  broker.subscribe((e) => events.push(e));
  const approve = broker.approver("s", "r1");
  const call = approve(request("w"), live());
  await sleep(10);
  const [open] = broker.pending();
  assert.equal(open.client, false, "the client was not asked: only the page can answer");
  assert.equal(open.requestId, "r1");
  assert.equal(broker.answer(open.id, { approve: true }, "dashboard"), true);
  assert.deepEqual(await call, { approved: true, outcome: "approved" });
  const closed = events.at(-1)!;
  assert.equal(closed.type === "closed" && closed.via, "dashboard");
  // Declined on the page: the PermissionError message of any decline.
  const second = approve(request("w2"), live());
  await sleep(10);
  broker.answer(broker.pending()[0].id, { approve: false }, "dashboard");
  assert.match((await second).message!, /Call to "fs\/w2" declined by the user$/);
  // Nobody watching: refused at once, and the message says the dashboard could have answered.
  watching = false;
  const refused = await approve(request("w3"), live());
  assert.equal(refused.outcome, "unavailable");
  assert.match(refused.message!, /keep the dashboard \(codemode ui\) open to answer there/);
  // A watcher that fails to say counts as nobody watching.
  const broken = new ApprovalBroker({
    timeoutSeconds: 5,
    fallback: "deny",
    watched: () => Promise.reject(new Error("unreadable")),
  });
  assert.equal((await broken.approver("s")(request("w"), live())).outcome, "unavailable");
});

Deno.test("with fallback allow a watching dashboard is not asked, and a question only the page can answer times out", async () => {
  const allow = new ApprovalBroker({ timeoutSeconds: 5, fallback: "allow", watched: () => true });
  const allowed = await allow.approver("s")(request("w"), live());
  assert.deepEqual([allowed.approved, allowed.outcome], [true, "unavailable"]);
  const brief = new ApprovalBroker({ timeoutSeconds: 0.05, fallback: "deny", watched: () => true });
  const timedOut = await brief.approver("s")(request("w"), live());
  assert.equal(timedOut.outcome, "timeout");
  assert.deepEqual(brief.pending(), []);
});

Deno.test("the argument summary is cut to a readable size and never shows a configured secret, whole or in part", () => {
  const secret = "sk-live-0123456789abcdefABCDEF";
  assert.equal(summarizeArguments({}, [secret]), "(none)");
  assert.equal(summarizeArguments({ path: "/tmp/a", n: 3 }, [secret]), 'path="/tmp/a", n=3');
  const summary = summarizeArguments({ token: secret, nested: { deep: [secret] } }, [secret]);
  assert.ok(!summary.includes(secret) && summary.includes(REDACTED), summary);
  // A secret straddling every possible cut: at no cut point may a piece of it show.
  for (let at = 150; at < 230; at++) {
    const text = "x".repeat(at) + secret + "y".repeat(50);
    const cut = summarizeArguments({ content: text }, [secret]);
    for (let n = 6; n <= secret.length; n++) {
      assert.ok(!cut.includes(secret.slice(0, n)), `a ${n}-character piece shows at offset ${at}: ${cut}`);
    }
  }
  const long = summarizeArguments({ content: "z".repeat(100_000), more: "q".repeat(5_000) }, [secret]);
  assert.ok(long.length < 1000, `${long.length} characters`);
  assert.match(long, /content="z+… \(100002 characters\)/);
});

Deno.test("the form asks a boolean approve and a once/session scope; only accept with approve: true approves", () => {
  assert.deepEqual(Object.keys(APPROVAL_FORM.properties), ["approve", "scope"]);
  assert.equal(APPROVAL_FORM.properties.approve.type, "boolean");
  assert.deepEqual(APPROVAL_FORM.required, ["approve"]);
  assert.deepEqual(decisionOf({ action: "accept", content: { approve: true, scope: "session" } }), {
    approve: true,
    scope: "session",
  });
  assert.deepEqual(decisionOf({ action: "accept", content: { approve: true } }), {
    approve: true,
    scope: "once",
  });
  assert.deepEqual(decisionOf({ action: "accept", content: { approve: "yes" } }), {
    approve: false,
    scope: "once",
  });
  assert.deepEqual(decisionOf({ action: "accept" }), { approve: false, scope: "once" });
  assert.deepEqual(decisionOf({ action: "decline" }), { approve: false });
  assert.equal(decisionOf({ action: "cancel" }), "cancelled");
  assert.equal(canAskForm(undefined), false);
  assert.equal(canAskForm({}), false);
  assert.equal(canAskForm({ elicitation: {} }), true, "an empty elicitation capability means forms");
  assert.equal(canAskForm({ elicitation: { form: {} } }), true);
  assert.equal(canAskForm({ elicitation: { url: {} } }), false);
});

Deno.test("the run clock stops while held, through overlapping holds, and runs on with the time that was left", async () => {
  const events: string[] = [];
  const started = performance.now();
  const clock = new RunClock(400, {
    onPause: () => events.push("pause"),
    onResume: () => events.push("resume"),
  });
  let expired = false;
  void clock.expired.then(() => (expired = true));
  await sleep(50);
  await Promise.all([clock.during(() => sleep(600)), sleep(50).then(() => clock.during(() => sleep(100)))]);
  assert.equal(expired, false, "600 ms held did not count");
  assert.deepEqual(events, ["pause", "resume"], "one pause for overlapping holds");
  assert.ok(clock.pausedMs >= 590, `${clock.pausedMs}`);
  await clock.expired;
  const running = performance.now() - started - clock.pausedMs;
  assert.ok(running >= 395, `the clock ran ${running} ms, not its 400`);
  clock.stop();
});

Deno.test("a dry run's plan is bounded and says what it left out", () => {
  const plan = new PlannedCalls();
  for (let i = 0; i < PLAN_LIMITS.calls + 5; i++) plan.add({ server: "s", tool: "t", arguments: { i } });
  assert.equal(plan.calls.length, PLAN_LIMITS.calls);
  assert.match(plan.note() ?? "", /^5 more planned call\(s\) are not listed/);
  assert.equal(new PlannedCalls().note(), undefined);
});
