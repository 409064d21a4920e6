/**
 * The pre-run check and plans end to end: a real `codemode serve` (stdio, podman) under an SDK client that
 * declares elicitation, the npm reference servers (filesystem over a scratch dir, memory, everything) and
 * the unannotated notes server. The planted programs come back with their finding in
 * `structuredContent.check` and nothing reached any server; the valid corpus gives no finding against the
 * real servers' schemas; help() and runtime.stubs() show the stubs; a plan of five writes is approved with
 * one question (by the client, or on the dashboard), a call it did not list is refused, a declined plan
 * writes nothing, and a client without elicitation cannot approve one.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, serve, type Served, serveTest } from "./_serve.ts";
import { type ApprovalHome, approvalHome, type AskingClient, askingClient, reply } from "./_approvals.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { startUi } from "./_browser.ts";
import { send } from "./_attempts_dashboard.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import type { StatsSnapshot } from "../../core/observe/stats.ts";

const usable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED pre-run check and plans suite: podman or image ${TEST_IMAGE} missing`);

const testdata = (path: string) => readFileSync(join(ROOT, "tests/testdata/precheck", path), "utf8");
const py = (text: string) => JSON.stringify(text);

interface World {
  s: Served;
  h: ApprovalHome;
  asking: AskingClient;
}
let world: Promise<World> | undefined;
const setup = () =>
  world ??= (async () => {
    const h = approvalHome();
    // "my-server" for mcp_servers["my-server"], and the skill the planted skill programs call.
    const config = JSON.parse(readFileSync(join(h.home, "MCPs", "servers.json"), "utf8"));
    config.mcpServers["my-server"] = config.mcpServers.everything;
    writeFileSync(join(h.home, "MCPs", "servers.json"), JSON.stringify(config));
    const skill = join(h.home, ".config", "codemode", "skills", "todo-counter");
    mkdirSync(skill, { recursive: true });
    writeFileSync(join(skill, "SKILL.md"), "---\nname: todo-counter\ndescription: Counts TODO lines\n---\n");
    writeFileSync(
      join(skill, "skill.py"),
      'async def count(path, *, limit=10):\n    """Counts TODO lines."""\n    return 0\n\n' +
        "def summary(text):\n    return text\n",
    );
    const asking = askingClient("precheck-plans-tests");
    const s = await serve(
      {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_DENY_SERVERS: "secret",
        CODEMODE_DENY_TOOLS: "memory/delete_entities",
      },
      h.home,
      asking.client,
    );
    return { s, h, asking };
  })();

const test = serveTest(usable, setup);

async function stats(s: Served): Promise<StatsSnapshot> {
  const text =
    ((await s.client.readResource({ uri: "codemode://stats" })).contents[0] as { text: string }).text;
  return JSON.parse(text);
}

test("each planted error comes back in structuredContent.check, and no server saw a call", async (w) => {
  const programs = testdata("planted.py").split("\n# ---\n").map((part) => {
    const lines = part.split("\n");
    const at = lines.findIndex((l) => l.startsWith("# expect: "));
    const [, kind, line, col] = /^# expect: (\S+) (\d+):(\d+)$/.exec(lines[at])!;
    return { code: lines.slice(at + 1).join("\n"), kind, line: Number(line), col: Number(col) };
  });
  for (const p of programs) {
    const r = await w.s.run(p.code);
    assert.equal(r.isError, true, p.code);
    const check = r.structured.check as { kind: string; line: number; col: number; fix: string }[];
    assert.deepEqual(
      check.map((f) => `${f.kind} ${f.line}:${f.col}`),
      [`${p.kind} ${p.line}:${p.col}`],
      p.code,
    );
    assert.ok(check[0].fix);
    assert.match(r.text, /The pre-run check found 1 problem, so nothing ran/);
  }
  assert.equal(existsSync(w.h.notesFile), false, "the add_note before each error never went out");
  const after = await stats(w.s);
  const called = after.upstream.flatMap((u) => u.tools.map((t) => `${u.server}/${t.tool}`));
  assert.deepEqual(called, [], "no upstream tool was called (the check only listed tools)");
  assert.equal(after.rpc.some((r) => r.method === "call_tool"), false);
});

test("the valid corpus gives no finding against the real servers' schemas", async (w) => {
  // The programs whose servers this serve has as the corpus knows them (my-server here is everything, and
  // delete_entities is denied), and that use no skill of their own tests.
  const known = /\b(?:mcp_servers\[["']|mcp_|call_tool\(["']|mcp\.servers\.)([A-Za-z0-9_-]+)/g;
  const ours = new Set(["everything", "filesystem", "memory", "notes"]);
  const own = (code: string) => !/\bskills\b|delete_entities/.test(code);
  const repo = JSON.parse(testdata("valid/repo_programs.json")) as { code: string }[];
  const hand = ["bridge_readme_examples.py", "dynamic_calls.py"].flatMap((f) =>
    testdata(`valid/${f}`).split("\n# ---\n").map((code) => ({ code }))
  );
  const corpus = [...repo, ...hand].map((p) => p.code).filter((code) =>
    own(code) && [...code.matchAll(known)].every((m) => ours.has(m[1]))
  );
  assert.ok(corpus.length > 200, `${corpus.length} programs`);
  const r = await w.s.run(
    `# codemode: nocheck
import ast, json
from mcp import _precheck
mcp_cache = object()
mcp_earlier = mcp_filesystem
from mcp import runtime as runtime_earlier
found = {}
for i, source in enumerate(json.loads(${py(JSON.stringify(corpus))})):
    f = _precheck.findings(source, ast.parse(source))
    if f:
        found[i] = [x["message"] for x in f]
found`,
    120,
  );
  assert.equal(r.isError, false, r.text);
  assert.equal(r.structured.value, "{}");
});

test("help() shows a tool's stub, and runtime.stubs() returns a server's .pyi that parses", async (w) => {
  const r = await w.s.run(`import ast, io, contextlib
from mcp import runtime
out = io.StringIO()
with contextlib.redirect_stdout(out):
    help(mcp_filesystem.write_file)
text = await runtime.stubs("memory")
ast.parse(text)
(out.getvalue(), text[:400], await runtime.stubs("filesystem", tool="write_file"))`);
  assert.equal(r.isError, false, r.text);
  const value = String(r.structured.value);
  assert.match(value, /write_file\(\*, path: str, content: str\) -> WriteFileResult/);
  assert.match(value, /Tools of the MCP server "memory"/);
  assert.match(value, /async def write_file\(\*, path: str, content: str\) -> WriteFileResult:/);
});

const FIVE_WRITES = (dir: string, extra = "") =>
  `from mcp import runtime
async with runtime.plan("write five reports") as p:
    for i in range(5):
        await mcp_filesystem.write_file(path=${py(dir)} + f"/report-{i}.txt", content=f"report {i}")${extra}
sorted(f for f in (await mcp_filesystem.list_directory(path=${
    py(dir)
  }))["content"].split("\\n") if "report" in f)`;

test("a plan of five writes is approved with one question, and the five are written", async (w) => {
  const dir = join(w.h.dir, "approved");
  mkdirSync(dir);
  w.asking.answer = reply.approve();
  const before = w.asking.questions.length;
  const r = await w.s.run(FIVE_WRITES(dir));
  assert.equal(r.isError, false, r.text);
  assert.equal(w.asking.questions.length, before + 1, "one question");
  const question = w.asking.questions.at(-1)!.question;
  assert.match(question.message, /approve a plan: "write five reports"[^]*these 5 calls/);
  for (let i = 0; i < 5; i++) {
    assert.match(question.message, new RegExp(`write_file: path="[^"]*/report-${i}\\.txt"`));
  }
  const form = (question as { requestedSchema?: { properties: object } }).requestedSchema;
  assert.deepEqual(Object.keys(form?.properties ?? {}), ["approve"], "one answer for the whole plan");
  assert.deepEqual(readdirSync(dir).sort(), [0, 1, 2, 3, 4].map((i) => `report-${i}.txt`));
  assert.equal(readFileSync(join(dir, "report-3.txt"), "utf8"), "report 3");
});

test("a call the approved plan did not list is refused, and not made", async (w) => {
  const dir = join(w.h.dir, "sneaky");
  mkdirSync(dir);
  w.asking.answer = reply.approve();
  const r = await w.s.run(FIVE_WRITES(
    dir,
    `
    if not p.dry:
        await mcp_filesystem.write_file(path=${py(dir)} + "/not-in-the-plan.txt", content="x")`,
  ));
  assert.equal(r.isError, true);
  assert.match(
    r.text,
    /PermissionError: Call to "filesystem\/write_file" refused: it is not in the plan the user approved/,
  );
  assert.equal(existsSync(join(dir, "not-in-the-plan.txt")), false);
  assert.equal(readdirSync(dir).length, 5, "the planned five went out before it");
});

test("a declined plan writes nothing and raises PermissionError", async (w) => {
  const dir = join(w.h.dir, "declined");
  mkdirSync(dir);
  w.asking.answer = reply.decline();
  const r = await w.s.run(FIVE_WRITES(dir));
  assert.equal(r.isError, true);
  assert.match(r.text, /PermissionError: The plan declined by the user; nothing in it ran/);
  assert.deepEqual(readdirSync(dir), []);
});

test("a plan answered on the dashboard runs; the client's own question is withdrawn", async (w) => {
  const dir = join(w.h.dir, "dashboard");
  mkdirSync(dir);
  w.asking.answer = reply.never();
  const ui = await startUi(w.h.home);
  try {
    const login = await send(ui.loginUrl);
    const cookie = String(login.headers["set-cookie"]).split(";")[0];
    const pending = w.s.run(FIVE_WRITES(dir));
    let approval: { id: string; plan?: { description: string; calls: number }; summary: string } | undefined;
    let pid = 0;
    for (let i = 0; i < 200 && !approval; i++) {
      const state = JSON.parse((await send(ui.url + "api/state", { headers: { cookie } })).body);
      for (const serve of state.serves) {
        const open = serve.state.approvals?.find((a: { plan?: unknown }) => a.plan);
        if (open) [approval, pid] = [open, serve.pid];
      }
      if (!approval) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(approval, "the dashboard shows the plan's question");
    assert.deepEqual(approval.plan, { description: "write five reports", calls: 5 });
    assert.match(approval.summary, /report-4\.txt/);
    const answered = await send(`${ui.url}api/serves/${pid}/approvals/${approval.id}`, {
      method: "POST",
      headers: { cookie, "content-type": "application/json", origin: ui.url.replace(/\/$/, "") },
      body: JSON.stringify({ answer: "approve" }),
    });
    assert.equal(answered.status, 202, answered.body);
    const r = await pending;
    assert.equal(r.isError, false, r.text);
    assert.equal(readdirSync(dir).length, 5);
    assert.ok(w.asking.questions.at(-1)!.answeredAt, "the client's form was withdrawn");
  } finally {
    await ui.stop();
  }
});

test("a client without elicitation cannot approve a plan: refused, nothing written", async (w) => {
  const dir = join(w.h.dir, "unasked");
  mkdirSync(dir);
  const plain = await serve({ CODEMODE_RUNTIME: "podman" }, w.h.home);
  try {
    const r = await plain.run(FIVE_WRITES(dir));
    assert.equal(r.isError, true);
    assert.match(r.text, /PermissionError: The plan needs the user's approval[^]*this client cannot ask/);
    assert.deepEqual(readdirSync(dir), []);
  } finally {
    await plain.close();
  }
});

Deno.test({
  name: "closing the pre-run check and plans suite",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    if (world) await (await world).s.close();
  },
});
