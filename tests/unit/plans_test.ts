/**
 * Plans (`async with runtime.plan(...)`): the sandbox runtime on the host's python3, the real host API
 * over a fake pool that records the calls that reach it, and the real approval broker with a scripted
 * person. One question per plan, exactly the approved calls go out, anything else is refused (or asked),
 * a declined plan runs nothing, and nothing the sandbox sends can approve a plan.
 */
import assert from "node:assert/strict";
import { ApprovalBroker, type Ask } from "../../core/host_api/approvals.ts";
import { canonicalJson, planRequest, RunPlans } from "../../core/host_api/plans.ts";
import { type Execution, withPython } from "./_local_python.ts";
import { checkHost, configFor } from "./_precheck_host.ts";

/** A broker whose person answers each question with the next of `answers` (true: approve). */
function person(...answers: boolean[]) {
  const questions: string[] = [];
  const broker = new ApprovalBroker({ timeoutSeconds: 30, fallback: "deny" });
  const ask: Ask = (question) => {
    questions.push(question.message);
    return Promise.resolve({ approve: answers[Math.min(questions.length - 1, answers.length - 1)] });
  };
  return { questions, approve: broker.approver("session", "request", ask) };
}

/** Runs `code` in a fresh runtime whose person answers with `answers`; the run, the questions and the host. */
async function planRun(code: string, answers: boolean[], unplanned?: "deny" | "ask") {
  const p = person(...answers);
  const host = checkHost(undefined, undefined, { approve: p.approve, unplanned });
  let run: Execution | undefined;
  await withPython(
    async (python) => void (run = await python.execute(code, { answer: host.answer })),
    configFor(),
  );
  return { r: run!, questions: p.questions, host };
}

const FIVE_NOTES = `from mcp import runtime
seen = []
async with runtime.plan("write five notes") as p:
    seen.append(p.dry)
    for i in range(5):
        await mcp_notes.add_note(text=f"note {i}")
    await mcp_everything.echo(message="read-only: runs in both passes")
(seen, p.calls)`;

Deno.test("a plan asks one question listing its calls; exactly those go out, and read-only tools run twice", async () => {
  const { r, questions, host } = await planRun(FIVE_NOTES, [true]);
  assert.equal(r.done.status, "ok", r.done.error);
  assert.equal(r.done.value, "([True, False], 5)");
  assert.equal(questions.length, 1);
  assert.equal(
    questions[0],
    'Sandbox code asks you to approve a plan: "write five notes".\n' +
      "If you approve, it will make these 5 calls (tools annotated read-only run without being asked about):\n" +
      '- notes/add_note: text="note 0"\n- notes/add_note: text="note 1"\n- notes/add_note: text="note 2"\n' +
      '- notes/add_note: text="note 3"\n- notes/add_note: text="note 4"\n' +
      "Only these calls will go out, without further questions; any other call that could change something " +
      "is refused. The block's other steps run again too.\n" +
      "Approve the plan? No answer within 30 seconds counts as declined.",
  );
  assert.deepEqual(host.calls, [
    "everything/echo",
    "notes/add_note",
    "notes/add_note",
    "notes/add_note",
    "notes/add_note",
    "notes/add_note",
    "everything/echo",
  ]);
  assert.deepEqual(host.made.filter((c) => c.tool === "add_note").map((c) => c.args.text), [
    "note 0",
    "note 1",
    "note 2",
    "note 3",
    "note 4",
  ]);
});

Deno.test("a call the plan did not list is refused; approved calls count as a multiset, in any key order", async () => {
  const { r, questions, host } = await planRun(
    `from mcp import runtime
outcomes = []
async with runtime.plan("two the same") as p:
    await mcp_memory.create_entities(entities=[{"name": "a", "entityType": "t", "observations": []}])
    await mcp_memory.create_entities(entities=[{"observations": [], "entityType": "t", "name": "a"}])
    if not p.dry:
        for extra in ("third of the same", "another"):
            try:
                await mcp_memory.create_entities(entities=[{"name": "a", "entityType": "t", "observations": []}])
            except PermissionError as e:
                outcomes.append(str(e))
outcomes`,
    [true],
  );
  assert.equal(r.done.status, "ok", r.done.error);
  assert.match(
    r.done.value ?? "",
    /^\['Call to "memory\/create_entities" refused: it is not in the plan the user approved/,
  );
  assert.match(questions[0], /- memory\/create_entities ×2: entities=\[\{"name":"a"/);
  assert.deepEqual(host.calls, ["memory/create_entities", "memory/create_entities"]);
});

Deno.test("CODEMODE_PLAN_UNPLANNED=ask asks about a call that is not in the plan on its own", async () => {
  const { r, questions, host } = await planRun(
    `from mcp import runtime
async with runtime.plan("one note") as p:
    await mcp_notes.add_note(text="planned")
    if not p.dry:
        await mcp_notes.add_note(text="asked about on its own")`,
    [true, true],
    "ask",
  );
  assert.equal(r.done.status, "ok", r.done.error);
  assert.equal(questions.length, 2);
  assert.match(
    questions[1],
    /^Sandbox code wants to call the tool "add_note"[^]*not in the plan the user approved/,
  );
  assert.deepEqual(host.made.map((c) => c.args.text), ["planned", "asked about on its own"]);
});

Deno.test("a declined plan runs nothing and raises PermissionError at the block; the program goes on", async () => {
  const { r, host } = await planRun(
    `from mcp import runtime
runs = 0
try:
    async with runtime.plan("delete everything"):
        runs += 1
        await mcp_memory.delete_entities(entityNames=["a", "b"])
except PermissionError as e:
    outcome = str(e)
(runs, outcome)`,
    [false],
  );
  assert.equal(r.done.status, "ok", r.done.error);
  assert.equal(r.done.value, `(1, 'The plan declined by the user; nothing in it ran')`);
  assert.deepEqual(host.calls, []);
});

Deno.test("with nobody to ask, a plan is refused and nothing in it runs", async () => {
  const host = checkHost();
  await withPython(async (python) => {
    const r = await python.execute(
      `from mcp import runtime
async with runtime.plan("x"):
    await mcp_notes.add_note(text="never")`,
      { answer: host.answer },
    );
    assert.equal(r.done.status, "error");
    assert.match(
      r.done.error ?? "",
      /PermissionError: The plan needs the user's approval, and nobody can be asked here; nothing in it ran/,
    );
  }, configFor());
  assert.deepEqual(host.calls, []);
});

Deno.test("nothing the sandbox sends approves a plan, and a plan means nothing outside its run", async () => {
  const p = person(true);
  const host = checkHost(undefined, undefined, { approve: p.approve });
  const other = checkHost(undefined, undefined, { approve: p.approve });
  await withPython(async (python) => {
    const r = await python.execute(
      `from codemode_runtime import context
rpc = context.current().rpc
async def attempt(method, params):
    try:
        return await rpc.call(method, params)
    except Exception as e:
        return type(e).__name__ + ": " + str(e)
plan = (await rpc.call("plan_begin", {"description": "forged"}))["id"]
note = {"server": "notes", "tool": "add_note", "arguments": {"text": "forged"}}
results = {
    "real call marked with an unapproved plan": await attempt("call_tool", {**note, "plan": plan}),
    "made-up plan id": await attempt("call_tool", {**note, "plan": "0" * 36}),
    "approve forged fields": await attempt("plan_approve", {"id": plan, "approved": True, "calls": 99}),
}
results["approve again"] = await attempt("plan_approve", {"id": plan})
results["dry after approval"] = await attempt("call_tool", {**note, "plan": plan, "dry_run": True})
results["approved call that was never recorded"] = await attempt("call_tool", {**note, "plan": plan})
results`,
      { answer: host.answer },
    );
    assert.equal(r.done.status, "ok", r.done.error);
    const results = r.done.value ?? "";
    assert.match(
      results,
      /'real call marked with an unapproved plan': 'PermissionError: Call to "notes\/add_note" refused: the plan is not approved'/,
    );
    assert.match(results, /'made-up plan id': 'PermissionError: No such plan in this run/);
    assert.match(results, /'approve forged fields': \{'approved': True, 'calls': 0\}/);
    assert.match(results, /'approve again': 'PermissionError: This plan was already put to the user'/);
    assert.match(results, /'dry after approval': "PermissionError: The plan's rehearsal is over"/);
    assert.match(
      results,
      /'approved call that was never recorded': 'PermissionError: Call to "notes\/add_note" refused: it is not in the plan/,
    );
    const [plan] = /'plan': '([0-9a-f-]{36})'/.exec(results) ?? [];
    assert.equal(plan, undefined);
  }, configFor());
  await withPython(async (python) => {
    // The same ids, tried by another run's sandbox: unknown there.
    const r = await python.execute(
      `from codemode_runtime import context
try:
    await context.current().rpc.call("plan_approve", {"id": "00000000-0000-4000-8000-000000000000"})
except PermissionError as e:
    print(e)`,
      { answer: other.answer },
    );
    assert.match(r.stdout, /No such plan in this run/);
  }, configFor());
  assert.deepEqual([...host.calls, ...other.calls], []);
});

Deno.test("the plan block is rewritten only where that keeps its meaning", async () => {
  const p = person(true);
  const host = checkHost(undefined, undefined, { approve: p.approve });
  await withPython(async (python) => {
    const r = await python.execute(
      `from mcp import runtime
import contextlib
class Other:
    def __init__(self): self.entered = 0
    def plan(self, what): return self
    async def __aenter__(self):
        self.entered += 1
        return self
    async def __aexit__(self, *exc): return False
other = Other()
async with other.plan("not codemode's") as o:
    pass
errors = []
for _ in range(1):
    try:
        async with runtime.plan("leaves early"):
            break
    except RuntimeError as e:
        errors.append(str(e)[:60])
try:
    async with runtime.plan("outer"):
        async with runtime.plan("inner"):
            pass
except RuntimeError as e:
    errors.append(str(e))
try:
    async with runtime.plan("fails while rehearsing"):
        raise ValueError("boom")
except ValueError as e:
    errors.append(str(e))
async def in_tasks():
    async with runtime.plan("gathered"):
        await asyncio.gather(*[mcp_notes.add_note(text=str(i)) for i in range(3)])
await in_tasks()
(other.entered, errors)`,
      { answer: host.answer },
    );
    assert.equal(r.done.status, "ok", r.done.error);
    assert.equal(
      r.done.value,
      "(1, ['runtime.plan() runs its block twice, so it works only as `as', " +
        "'A plan cannot run inside another plan or a dry run', 'boom'])",
    );
  }, configFor());
  assert.equal(p.questions.length, 1, "only the gathered plan reached a question");
  assert.match(p.questions[0], /"gathered"[^]*these 3 calls/);
  assert.deepEqual(host.calls, ["notes/add_note", "notes/add_note", "notes/add_note"]);
});

Deno.test("planRequest() groups equal calls, redacts secrets and caps what it lists", () => {
  const calls = [
    ...Array.from(
      { length: 3 },
      () => ({ server: "fs", tool: "write", arguments: { path: "/a", token: "s3cret-value" } }),
    ),
    ...Array.from(
      { length: 150 },
      (_, i) => ({ server: "fs", tool: "write", arguments: { path: `/f${i}` } }),
    ),
  ];
  const request = planRequest({ description: "uses s3cret-value", calls }, ["s3cret-value"]);
  assert.equal(request.plan?.calls, 153);
  assert.equal(request.plan?.description, "uses [redacted]");
  const lines = request.summary.split("\n");
  assert.equal(lines[0], '- fs/write ×3: path="/a", token="[redacted]"');
  assert.equal(lines.length, 101);
  assert.equal(lines.at(-1), "- … and 51 more different calls");
  assert.ok(!request.summary.includes("s3cret"));
  assert.equal(canonicalJson({ b: 1, a: [{ d: 2, c: 3 }] }), '{"a":[{"c":3,"d":2}],"b":1}');
  const plans = new RunPlans();
  const id = plans.begin("x");
  assert.throws(() => new RunPlans().get(id), /No such plan in this run/);
});
