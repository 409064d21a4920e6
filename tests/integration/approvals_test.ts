/**
 * Approvals and dry runs end to end: a real `codemode serve` (stdio, podman) with
 * CODEMODE_CONFIRM_DESTRUCTIVE=1, real servers from npm (filesystem `write_file`, memory
 * `delete_entities`) plus the unannotated notes server, and the SDK client answering elicitation
 * questions: accept, decline, cancel, never (timeout), scope "session", calls under gather, a wait longer
 * than the run's timeout, dry runs, and the stats and logs every question leaves.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, serve, type Served, SERVER_SECRET } from "./_serve.ts";
import { type ApprovalHome, approvalHome, type AskingClient, askingClient, reply } from "./_approvals.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import type { StatsSnapshot } from "../../core/observe/stats.ts";

const usable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED approvals suite: podman or image ${TEST_IMAGE} missing`);

const CONFIRM_TIMEOUT = 6;

interface World {
  s: Served;
  h: ApprovalHome;
  asking: AskingClient;
  logFile: string;
}
let world: World | undefined;
async function setup(): Promise<World> {
  if (world) return world;
  const h = approvalHome();
  const asking = askingClient();
  const logFile = join(h.home, "codemode.log");
  const s = await serve(
    {
      CODEMODE_RUNTIME: "podman",
      CODEMODE_CONFIRM_DESTRUCTIVE: "1",
      CODEMODE_CONFIRM_TIMEOUT: String(CONFIRM_TIMEOUT),
      CODEMODE_LOG_LEVEL: "info",
      CODEMODE_LOG_FILE: logFile,
    },
    h.home,
    asking.client,
  );
  return world = { s, h, asking, logFile };
}

const test = (name: string, fn: (w: World) => Promise<void>) =>
  Deno.test({
    name,
    ignore: !usable,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => fn(await setup()),
  });

/** Runs code that must succeed; returns the repr of its value. */
async function value(w: World, code: string, timeout?: number): Promise<string> {
  const r = await w.s.run(code, timeout);
  assert.equal(r.isError, false, r.text);
  return String(r.structured.value);
}

const py = (text: string) => JSON.stringify(text);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const lines = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

test("an accepted question lets write_file run; the question names the tool and hides configured secrets", async (w) => {
  w.asking.answer = reply.approve();
  const asked = w.asking.questions.length;
  const file = join(w.h.dir, "accepted.txt");
  const r = await value(
    w,
    `(await mcp_filesystem.write_file(path=${py(file)}, content="hello ${SERVER_SECRET}"))["content"]`,
  );
  assert.match(r, /Successfully wrote to/);
  assert.equal(
    readFileSync(file, "utf8"),
    `hello ${SERVER_SECRET}`,
    "the call went out with its real arguments",
  );
  const [{ question }] = w.asking.questions.slice(asked);
  assert.equal(w.asking.questions.length, asked + 1);
  assert.equal(question.mode, "form");
  assert.match(question.message, /wants to call the tool "write_file" of the MCP server "filesystem"/);
  assert.match(question.message, new RegExp(`path=${py(file).replaceAll("/", "\\/")}`));
  assert.match(question.message, /content="hello \[redacted\]"/);
  assert.ok(!question.message.includes(SERVER_SECRET), "a server's secret never reaches the question");
  assert.match(question.message, /CODEMODE_CONFIRM_DESTRUCTIVE/);
  assert.match(
    question.message,
    new RegExp(`No answer within ${CONFIRM_TIMEOUT} seconds counts as declined`),
  );
  const schema = question.requestedSchema as {
    properties: Record<string, { type: string; oneOf?: unknown[] }>;
  };
  assert.equal(schema.properties.approve.type, "boolean");
  assert.deepEqual(
    (schema.properties.scope.oneOf as { const: string }[]).map((o) => o.const),
    ["once", "session"],
  );
});

test("decline, approve: false and cancel raise PermissionError in the sandbox, nothing is written, the run goes on", async (w) => {
  w.asking.answer = reply.inTurn(reply.decline(), reply.refuse(), reply.cancel());
  const files = [0, 1, 2].map((i) => join(w.h.dir, `refused-${i}.txt`));
  const r = await value(
    w,
    `out = []
for path in ${JSON.stringify(files)}:
    try:
        await mcp_filesystem.write_file(path=path, content="x")
        out.append("written")
    except PermissionError as e:
        out.append(str(e))
out.append("carried on")
out`,
  );
  assert.equal(
    r,
    "['Call to \"filesystem/write_file\" declined by the user', " +
      "'Call to \"filesystem/write_file\" declined by the user', " +
      "'Call to \"filesystem/write_file\" declined by the user: the question was dismissed without an answer', " +
      "'carried on']",
  );
  for (const file of files) assert.equal(existsSync(file), false, `${file} must not exist`);
});

test("memory's delete_entities is asked about (create_entities, not destructive, is not); declined it deletes nothing", async (w) => {
  w.asking.answer = reply.inTurn(reply.decline(), reply.approve());
  const asked = w.asking.questions.length;
  const r = await value(
    w,
    `await mcp_memory.create_entities(entities=[{"name": "keep-me", "entityType": "t", "observations": []}])
names = lambda g: sorted(e["name"] for e in g["entities"])
try:
    await mcp_memory.delete_entities(entityNames=["keep-me"])
    refused = None
except PermissionError as e:
    refused = str(e)
before = names(await mcp_memory.read_graph())
await mcp_memory.delete_entities(entityNames=["keep-me"])
(refused, "keep-me" in before, "keep-me" in names(await mcp_memory.read_graph()))`,
  );
  assert.equal(r, `('Call to "memory/delete_entities" declined by the user', True, False)`);
  const tools = w.asking.questions.slice(asked).map((q) =>
    /the tool "([^"]+)"/.exec(q.question.message)?.[1]
  );
  assert.deepEqual(tools, ["delete_entities", "delete_entities"]);
});

test("an unannotated tool may be destructive, so it is asked about", async (w) => {
  w.asking.answer = reply.approve();
  const asked = w.asking.questions.length;
  const before = lines(w.h.notesFile).length;
  assert.equal(
    await value(w, `(await mcp_notes.add_note(text="approved note"))["count"]`),
    String(before + 1),
  );
  assert.equal(lines(w.h.notesFile).at(-1), "approved note");
  assert.match(w.asking.questions[asked].question.message, /"add_note" of the MCP server "notes"/);
});

test("a question nobody answers times out after CODEMODE_CONFIRM_TIMEOUT, is withdrawn, and counts as declined", async (w) => {
  w.asking.answer = reply.never();
  const asked = w.asking.questions.length;
  const file = join(w.h.dir, "never.txt");
  const started = Date.now();
  const r = await value(
    w,
    `try:
    await mcp_filesystem.write_file(path=${py(file)}, content="x")
    out = "written"
except PermissionError as e:
    out = str(e)
out`,
  );
  const ms = Date.now() - started;
  assert.equal(
    r,
    `'Call to "filesystem/write_file" declined by the user: no answer within ${CONFIRM_TIMEOUT}s (CODEMODE_CONFIRM_TIMEOUT), which counts as declined'`,
  );
  assert.ok(ms >= CONFIRM_TIMEOUT * 1000 - 200, `answered after ${ms} ms`);
  assert.equal(existsSync(file), false);
  assert.equal(w.asking.questions.length, asked + 1);
  assert.ok(w.asking.questions[asked].answeredAt, "the server withdrew the question from the client");
});

test("calls under asyncio.gather are asked one at a time, in the order they were made", async (w) => {
  w.asking.answer = reply.after(150, reply.approve());
  const asked = w.asking.questions.length;
  const before = w.asking.mostOpen();
  const r = await value(
    w,
    `import asyncio
done = await asyncio.gather(*[mcp_filesystem.write_file(path=${
      py(w.h.dir)
    } + f"/gather-{i}.txt", content=str(i))
    for i in range(5)])
len(done)`,
  );
  assert.equal(r, "5");
  const order = w.asking.questions.slice(asked).map((q) => /gather-(\d)\.txt/.exec(q.question.message)?.[1]);
  assert.deepEqual(order, ["0", "1", "2", "3", "4"]);
  assert.equal(Math.max(before, w.asking.mostOpen()), 1, "never two questions open at once");
  for (let i = 0; i < 5; i++) assert.equal(readFileSync(join(w.h.dir, `gather-${i}.txt`), "utf8"), String(i));
});

test("time waiting for the person does not count: a run with timeout=2 survives a 4 s approval wait", async (w) => {
  w.asking.answer = reply.after(4000, reply.approve());
  const file = join(w.h.dir, "slow-approval.txt");
  const r = await w.s.run(
    `import time
t = time.monotonic()
await mcp_filesystem.write_file(path=${py(file)}, content="late")
round(time.monotonic() - t)`,
    2,
  );
  assert.equal(r.isError, false, r.text);
  assert.ok(Number(r.structured.value) >= 4, r.text);
  assert.ok(Number(r.structured.duration) >= 4, r.text);
  assert.equal(readFileSync(file, "utf8"), "late");
  // The timeout itself still holds once nobody is being asked.
  const slow = await w.s.run("import time\ntime.sleep(5)", 2);
  assert.equal(slow.structured.status, "timeout", slow.text);
});

test("a dry run lists three planned calls, changes nothing and asks nothing; read-only tools still run", async (w) => {
  w.asking.answer = reply.approve();
  await value(
    w,
    `await mcp_memory.create_entities(entities=[{"name": "dry-keep", "entityType": "t", "observations": []}])`,
  );
  const asked = w.asking.questions.length;
  const notesBefore = lines(w.h.notesFile).length;
  const file = join(w.h.dir, "dry.txt");
  const r = await w.s.run(
    `from mcp import runtime
async with runtime.dry_run():
    w = await mcp_filesystem.write_file(path=${py(file)}, content="planned")
    d = await mcp_memory.delete_entities(entityNames=["dry-keep"])
    n = await mcp_notes.add_note(text="planned note")
    listed = await mcp_filesystem.list_allowed_directories()
(w, d, n, "Allowed directories" in listed["content"])`,
  );
  assert.equal(r.isError, false, r.text);
  assert.equal(r.structured.value, "(None, None, None, True)");
  assert.deepEqual(r.structured.planned_calls, [
    { server: "filesystem", tool: "write_file", arguments: { path: file, content: "planned" } },
    { server: "memory", tool: "delete_entities", arguments: { entityNames: ["dry-keep"] } },
    { server: "notes", tool: "add_note", arguments: { text: "planned note" } },
  ]);
  assert.match(
    r.text,
    /planned calls \(not made\):\n- filesystem\/write_file \{"path":.*\n- memory\/delete_entities .*\n- notes\/add_note /,
  );
  assert.equal(existsSync(file), false, "the file really was not written");
  assert.equal(lines(w.h.notesFile).length, notesBefore, "no note was added");
  assert.equal(
    await value(w, `"dry-keep" in [e["name"] for e in (await mcp_memory.read_graph())["entities"]]`),
    "True",
    "the entity was not deleted",
  );
  assert.equal(w.asking.questions.length, asked, "a dry run asks nothing");
  // The sync form; then the same call for real, which asks.
  const sync = await w.s.run(`with runtime.dry_run():\n    await mcp_notes.add_note(text="sync plan")`);
  assert.deepEqual(sync.structured.planned_calls, [{
    server: "notes",
    tool: "add_note",
    arguments: { text: "sync plan" },
  }]);
  await value(w, `await mcp_notes.add_note(text="for real")`);
  assert.equal(w.asking.questions.length, asked + 1);
  assert.equal(lines(w.h.notesFile).at(-1), "for real");
});

test("every question is counted in stats (resource and `codemode stats`) and logged with its request id", async (w) => {
  const read = async () =>
    JSON.parse(
      ((await w.s.client.readResource({ uri: "codemode://stats" })).contents[0] as { text: string }).text,
    ) as StatsSnapshot;
  const before = (await read()).approvals;
  w.asking.answer = reply.inTurn(reply.approve(), reply.decline());
  await value(
    w,
    `for i in range(2):
    try:
        await mcp_filesystem.write_file(path=${py(w.h.dir)} + f"/stats-{i}.txt", content="x")
    except PermissionError:
        pass`,
  );
  const after = (await read()).approvals;
  assert.deepEqual(
    [after.asked - before.asked, after.approved - before.approved, after.declined - before.declined],
    [2, 1, 1],
  );
  assert.ok(after.timedOut >= 1, "the timeout test's question is counted as timed out");

  await new Promise((resolve) => setTimeout(resolve, 1500)); // the snapshot file is written once a second
  const cli = spawnSync(join(ROOT, "node_modules/.bin/deno"), [
    "run",
    "-A",
    "--quiet",
    join(ROOT, "cli.ts"),
    "stats",
    "--json",
  ], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", HOME: w.h.home, CODEMODE_STATE_DIR: join(w.h.home, "state") },
  });
  const published = (JSON.parse(cli.stdout) as StatsSnapshot[]).find((p) => p.pid === w.s.transport.pid);
  assert.deepEqual(published?.approvals, after);
  const table = spawnSync(join(ROOT, "node_modules/.bin/deno"), [
    "run",
    "-A",
    "--quiet",
    join(ROOT, "cli.ts"),
    "stats",
  ], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH ?? "",
      HOME: w.h.home,
      CODEMODE_STATE_DIR: join(w.h.home, "state"),
      NO_COLOR: "1",
    },
  });
  assert.match(table.stdout, new RegExp(`Approvals: ${after.asked} asked, ${after.approved} approved`));

  const log = lines(w.logFile).map((line) => JSON.parse(line) as Record<string, unknown>);
  const asked = log.filter((l) => l.msg === "approval asked");
  const answered = log.filter((l) => l.msg === "approval answered");
  assert.equal(asked.length, after.asked);
  assert.equal(answered.length, after.asked);
  for (const line of [...asked, ...answered]) assert.match(String(line.requestId), /^stdio\.\d+\./);
  const last = asked.at(-1)!;
  const closing = answered.find((l) => l.approval === last.approval)!;
  assert.deepEqual([closing.requestId, closing.outcome], [last.requestId, "declined"]);
  assert.ok(log.some((l) => l.msg === "run_python started" && l.requestId === last.requestId));
});

test("cancelling the run withdraws its open question from the client, and the session keeps serving", async (w) => {
  w.asking.answer = reply.never();
  const asked = w.asking.questions.length;
  const file = join(w.h.dir, "cancelled.txt");
  const controller = new AbortController();
  const call = w.s.client.callTool(
    {
      name: "run_python",
      arguments: { code: `await mcp_filesystem.write_file(path=${py(file)}, content="x")` },
    },
    { signal: controller.signal },
  ).then(() => "answered", () => "aborted");
  const deadline = Date.now() + 30_000;
  while (w.asking.questions.length === asked && Date.now() < deadline) await sleep(50);
  assert.equal(w.asking.questions.length, asked + 1, "the question was asked");
  controller.abort();
  const abortedAt = Date.now();
  assert.equal(await call, "aborted");
  while (!w.asking.questions[asked].answeredAt && Date.now() < deadline) await sleep(50);
  assert.ok(
    w.asking.questions[asked].answeredAt,
    "the server withdrew the question when the run was cancelled",
  );
  const ms = Date.now() - abortedAt;
  assert.ok(
    ms < (CONFIRM_TIMEOUT - 2) * 1000,
    `withdrawn at once, not at CODEMODE_CONFIRM_TIMEOUT (${ms} ms)`,
  );
  assert.equal(existsSync(file), false);
  assert.equal(await value(w, "6 * 7"), "42");
});

test("scope session approves the tool once for ten calls, for the rest of the session", async (w) => {
  w.asking.answer = reply.approve("session");
  const asked = w.asking.questions.length;
  const before = lines(w.h.notesFile).length;
  await value(w, `for i in range(10):\n    await mcp_notes.add_note(text=f"session {i}")`);
  assert.equal(w.asking.questions.length, asked + 1);
  assert.equal(lines(w.h.notesFile).length, before + 10);
  await value(w, `await mcp_notes.add_note(text="next run")`);
  assert.equal(w.asking.questions.length, asked + 1, "still approved in the next run of the session");
  w.asking.answer = reply.decline();
  const other = await value(
    w,
    `try:\n    await mcp_filesystem.write_file(path=${
      py(w.h.dir)
    } + "/other.txt", content="x")\nexcept PermissionError as e:\n    out = str(e)\nout`,
  );
  assert.match(other, /declined by the user/, "another tool is still asked about");
  assert.equal(w.asking.questions.length, asked + 2);
});

Deno.test({
  name: "approvals suite: the serve shuts down cleanly",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await world?.s.close();
  },
});
