/**
 * Approval requests other than a tool call (adding a server, a plan): their own question text and scopes,
 * form fields whose values reach the requester, never remembered for the session, an add refused without
 * a client whatever CODEMODE_CONFIRM_FALLBACK says, not answerable from a page when a value is required,
 * and a scope that was not offered ignored wherever the answer comes from. Also the add question itself:
 * what it shows (never a secret's value) and how the answer's values are checked; and a plan's
 * approve-only form.
 */
import assert from "node:assert/strict";
import { ApprovalBroker, type ApprovalRequest, type PendingApproval } from "../../core/host_api/approvals.ts";
import { approvalForm, decisionOf } from "../../core/serve/elicitation.ts";
import { answerFromInbox } from "../../core/serve/approval_activity.ts";
import { ADD_SCOPES, addRequest, answeredValues, askedInputs } from "../../core/host_api/add_question.ts";
import type { LaunchPlan } from "../../core/registry/launch.ts";
import { planRequest } from "../../core/host_api/plans.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const live = () => new AbortController().signal;

const plan: LaunchPlan = {
  type: "npm",
  command: ["npx", "-y", "@x/server@1.0.0"],
  target: "@x/server",
  version: "1.0.0",
  notes: [],
  inputs: [
    { name: "API_KEY", kind: "env", required: true, secret: true, description: "the key" },
    { name: "DATA_DIR", kind: "env", required: false, secret: false, default: "/tmp/d" },
    { name: "REGION", kind: "env", required: false, secret: false, fixed: "eu" },
    { name: "root", kind: "arg", required: true, secret: false, position: "positional", format: "filepath" },
  ],
};
const question = {
  name: "io.x/server",
  version: "1.0.0",
  alias: "server",
  registry: "registry.example",
  description: "does things",
  plan,
  given: { DATA_DIR: "/srv/data" },
  reason: 'CODEMODE_ADD_SERVERS is "ask"',
};

Deno.test("the add question shows what runs and the variables by name, never a value", () => {
  const asked = askedInputs(plan, question.given);
  assert.deepEqual(asked.map((a) => [a.field.name, a.field.required]), [["env_API_KEY", true], [
    "arg_root",
    true,
  ]]);
  const request = addRequest(question, asked);
  assert.equal(request.kind, "add_server");
  assert.equal(request.summary, "npx -y @x/server@1.0.0 '<root>'");
  assert.equal(
    request.text,
    [
      'Sandbox code wants to add the MCP server "io.x/server" (version 1.0.0) from the registry at ' +
      "registry.example, as mcp_server.",
      "It runs: npx -y @x/server@1.0.0 '<root>'",
      "Environment variables: API_KEY (secret, required: you fill it in below), DATA_DIR (set by sandbox code), " +
      "REGION (set by the entry)",
      "The registry describes it as: does things",
      "Nothing else from the entry runs; a local server starts with codemode's safe environment.",
    ].join("\n"),
  );
  assert.deepEqual(request.scopes, ADD_SCOPES);
  assert.equal(request.fallback, "deny");
  assert.deepEqual(answeredValues(asked, { env_API_KEY: "k", arg_root: "/data" }), {
    values: { API_KEY: "k", root: "/data" },
  });
  assert.deepEqual(answeredValues(asked, { arg_root: "/data" }), {
    problem: "the variable API_KEY is required, and no value was given",
  });
  assert.deepEqual(answeredValues(asked, { env_API_KEY: "k", arg_root: "-rf" }), {
    problem: 'the value given for the argument root cannot be used: an argument value may not start with "-"',
  });
  assert.deepEqual(answeredValues(asked, { env_API_KEY: "k\n", arg_root: "/d" }), {
    problem: "the value given for the variable API_KEY cannot be used: it contains control characters",
  });
});

Deno.test("a form with the request's scopes and fields, and the decision read from it", () => {
  const request = addRequest(question, askedInputs(plan, question.given));
  const form = approvalForm(request) as {
    properties: Record<string, Record<string, unknown>>;
    required: string[];
  };
  assert.deepEqual(Object.keys(form.properties), ["approve", "scope", "env_API_KEY", "arg_root"]);
  assert.deepEqual(form.required, ["approve"], "a person can refuse without filling anything in");
  assert.equal(form.properties.scope.default, "session");
  assert.deepEqual(
    decisionOf({ action: "accept", content: { approve: true, scope: "keep", env_API_KEY: "k" } }, request),
    {
      approve: true,
      scope: "keep",
      values: { env_API_KEY: "k" },
    },
  );
  // A scope the question did not offer falls back to its default; unknown fields are not taken.
  assert.deepEqual(
    decisionOf({ action: "accept", content: { approve: true, scope: "once", other: "x" } }, request),
    {
      approve: true,
      scope: "session",
      values: {},
    },
  );
  assert.deepEqual(decisionOf({ action: "decline" }, request), { approve: false });
});

Deno.test("requests of another kind are asked every time, get the scope and values, and never fall back to allow", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "allow", watched: () => true });
  const asked: PendingApproval[] = [];
  const approve = broker.approver("s", "r", (q) => {
    asked.push(q);
    return Promise.resolve({ approve: true, scope: "keep", values: { env_API_KEY: "k" } });
  });
  const request: ApprovalRequest = addRequest(question, askedInputs(plan, question.given));
  assert.deepEqual(await approve(request, live()), {
    approved: true,
    outcome: "approved",
    scope: "keep",
    values: { env_API_KEY: "k" },
  });
  assert.equal((await approve(request, live())).outcome, "approved", "asked again: never remembered");
  assert.equal(asked.length, 2);
  assert.match(asked[0].message, /^Sandbox code wants to add the MCP server "io\.x\/server"/);
  assert.match(
    asked[0].message,
    /Asked because CODEMODE_ADD_SERVERS is "ask"\.\nApprove this\? No answer within/,
  );
  // No client: refused, though CODEMODE_CONFIRM_FALLBACK=allow; a required value needs the client's form.
  const refused = await broker.approver("s")(request, live());
  assert.equal(refused.approved, false);
  assert.equal(refused.outcome, "unavailable");
  assert.match(refused.message!, /^Adding the MCP server "io\.x\/server" needs the user's approval/);
  assert.doesNotMatch(refused.message!, /dashboard/);
  assert.match(refused.message!, /or ask the user to do it$/);
});

Deno.test("a page can answer a request without required values, with an offered scope only", async () => {
  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny", watched: () => true });
  const noValues = addRequest({ ...question, plan: { ...plan, inputs: [] } }, []);
  const call = broker.approver("s")(noValues, live());
  await sleep(10);
  const [open] = broker.pending();
  assert.equal(open.client, false);
  assert.equal(
    answerFromInbox(broker, { kind: "approval", id: open.id, answer: "approve", scope: "once" }),
    false,
  );
  assert.equal(
    answerFromInbox(broker, { kind: "approval", id: open.id, answer: "approve", scope: "keep" }),
    true,
  );
  assert.deepEqual(await call, { approved: true, outcome: "approved", scope: "keep" });
  // answer() itself ignores a scope the question did not offer.
  const again = broker.approver("s")(noValues, live());
  await sleep(10);
  broker.answer(broker.pending()[0].id, { approve: true, scope: "forever" }, "dashboard");
  assert.equal((await again).scope, "session");
});

Deno.test("a plan is one more kind: an approve-only form, asked every time, named as the plan, answered on a page", async () => {
  const request = planRequest({
    description: "two notes",
    calls: [
      { server: "notes", tool: "add", arguments: { text: "a" } },
      { server: "notes", tool: "add", arguments: { text: "b" } },
    ],
  }, []);
  assert.equal(request.kind, "plan");
  assert.deepEqual(request.plan, { description: "two notes", calls: 2 });
  const form = approvalForm(request) as { properties: Record<string, unknown> };
  assert.deepEqual(Object.keys(form.properties), ["approve"], "one answer for the whole plan");
  assert.deepEqual(decisionOf({ action: "accept", content: { approve: true, scope: "session" } }, request), {
    approve: true,
    scope: undefined,
  });

  const broker = new ApprovalBroker({ timeoutSeconds: 5, fallback: "deny", watched: () => true });
  const asked: PendingApproval[] = [];
  const approve = broker.approver("s", "r", (q) => {
    asked.push(q);
    return Promise.resolve({ approve: true, scope: "session" });
  });
  assert.equal((await approve(request, live())).approved, true);
  assert.equal(
    (await approve(request, live())).outcome,
    "approved",
    "asked again: a plan is never remembered",
  );
  assert.equal(asked.length, 2);
  assert.match(asked[0].message, /^Sandbox code asks you to approve a plan: "two notes"\./);
  assert.match(asked[0].message, /- notes\/add: text="a"\n- notes\/add: text="b"\n/);
  assert.match(asked[0].message, /\nApprove the plan\? No answer within 5 seconds counts as declined\.$/);
  // A call to one of its tools is still asked about: approving the plan approved no tool for the session.
  const call = { server: "notes", tool: "add", summary: 'text="c"', reason: "asked" };
  let callAsked = 0;
  const once = broker.approver("s", "r", () => {
    callAsked++;
    return Promise.resolve({ approve: false });
  });
  assert.equal((await once(call, live())).approved, false);
  assert.equal(callAsked, 1);

  // Only a page to answer: Approve (no scope) works; a scope the plan did not offer is refused.
  const pending = broker.approver("s")(request, live());
  await sleep(10);
  const [open] = broker.pending();
  assert.equal(open.kind, "plan");
  assert.equal(
    answerFromInbox(broker, { kind: "approval", id: open.id, answer: "approve", scope: "session" }),
    false,
  );
  assert.equal(answerFromInbox(broker, { kind: "approval", id: open.id, answer: "decline" }), true);
  assert.deepEqual(await pending, {
    approved: false,
    outcome: "declined",
    message: "The plan declined by the user",
  });
});
