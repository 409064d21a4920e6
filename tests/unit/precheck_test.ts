/**
 * The pre-run check, with the sandbox runtime on the host's python3 and the real host API over a fake
 * pool that records every tool call: zero findings on the valid corpus (the repository's own test
 * programs, the docs' examples, the Python bridge's README examples, programs with dynamic calls), the
 * one planted finding of each planted program with nothing called, and the ways to skip the check.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Policy } from "../../core/config/policy.ts";
import { type RpcFrame, withPython } from "./_local_python.ts";
import { checkHost, configFor } from "./_precheck_host.ts";

const testdata = (path: string) =>
  readFileSync(new URL(`../testdata/precheck/${path}`, import.meta.url), "utf8");
const split = (text: string) => text.split("\n# ---\n");

/** Every program of the valid corpus, with where it came from. */
function validCorpus(): { from: string; code: string }[] {
  const repo = JSON.parse(testdata("valid/repo_programs.json")) as { from: string; code: string }[];
  const hand = ["bridge_readme_examples.py", "dynamic_calls.py"].flatMap((file) =>
    split(testdata(`valid/${file}`)).map((code) => ({ from: file, code }))
  );
  return [...repo, ...hand];
}

/** The planted programs: code (without its marker line) and the finding it must give. */
function planted(): { code: string; kind: string; line: number; col: number }[] {
  return split(testdata("planted.py").replace(/^(#[^\n]*\n)+?(?=# expect:)/, "")).map((part) => {
    const [marker, ...lines] = part.split("\n");
    const m = /^# expect: (\S+) (\d+):(\d+)$/.exec(marker);
    if (!m) throw new Error(`No expect line in ${part}`);
    return { code: lines.join("\n"), kind: m[1], line: Number(m[2]), col: Number(m[3]) };
  });
}

/** The skills the planted skill programs use, as list_skills and read_skill answer. */
const SKILL_CODE = `async def count(path, *, limit=10):
    """Counts TODO lines."""
    return 0

def summary(text):
    return text
`;

const POLICY = new Policy({ denyServers: ["secret"], denyTools: ["memory/delete_entities"] });

function host() {
  const base = checkHost(undefined, POLICY);
  const answer = (rpc: RpcFrame) => {
    if (rpc.method === "list_skills") {
      return { value: [{ name: "todo-counter", module: "todo_counter", has_code: true, digest: "d1" }] };
    }
    if (rpc.method === "read_skill") return { value: { name: "todo-counter", code: SKILL_CODE } };
    return base.answer(rpc);
  };
  return { calls: base.calls, answer };
}

/** A cell that prints the findings of each program in `programs` without running any of them. */
function findingsCell(programs: string[]): string {
  return `# codemode: nocheck
import ast, json
from mcp import _precheck
# Names the test programs use as bound in an earlier run: never relied on, whatever they are.
mcp_cache = object()
mcp_earlier = mcp_filesystem
from mcp import runtime as runtime_earlier
_out = []
for _source in json.loads(${JSON.stringify(JSON.stringify(programs))}):
    _out.append([{k: f[k] for k in ("line", "col", "kind", "message", "fix")}
                 for f in _precheck.findings(_source, ast.parse(_source))])
print(json.dumps(_out))`;
}

Deno.test("the valid corpus gives no finding: test programs, docs, the bridge's examples, dynamic calls", async () => {
  const corpus = validCorpus();
  assert.ok(corpus.length > 300, `${corpus.length} programs`);
  const h = checkHost(); // every server open; skills off here, so skill calls are not judged
  await withPython(async (python) => {
    const r = await python.execute(findingsCell(corpus.map((p) => p.code)), {
      answer: h.answer,
      timeout: 120,
    });
    assert.equal(r.done.status, "ok", r.done.error);
    const found = (JSON.parse(r.stdout) as unknown[][]).flatMap((findings, i) =>
      findings.length ? [{ program: corpus[i], findings }] : []
    );
    assert.deepEqual(found, []);
    const checked = r.rpcs.filter((f) => f.method === "check_calls").length;
    assert.ok(checked > 50, `the host checked the calls of ${checked} programs`);
  }, configFor());
  assert.deepEqual(h.calls, [], "checking ran no tool");
});

Deno.test("each planted error is the one finding, at its line and column, and nothing runs", async () => {
  const programs = planted();
  const h = host();
  await withPython(async (python) => {
    const cell = await python.execute(findingsCell(programs.map((p) => p.code)), { answer: h.answer });
    assert.equal(cell.done.status, "ok", cell.done.error);
    const found = JSON.parse(cell.stdout) as { line: number; col: number; kind: string; fix: string }[][];
    programs.forEach((p, i) => {
      assert.deepEqual(
        found[i].map((f) => `${f.kind} ${f.line}:${f.col}`),
        [`${p.kind} ${p.line}:${p.col}`],
        `${p.code}\n${JSON.stringify(found[i], null, 1)}`,
      );
      assert.ok(found[i][0].fix, "every finding says how to fix it");
    });
    for (const p of programs) {
      const r = await python.execute(p.code, { answer: h.answer });
      assert.equal(r.done.status, "error");
      assert.deepEqual(r.done.check?.map((f) => (f as { kind: string }).kind), [p.kind], p.code);
      assert.match(
        r.done.error ?? "",
        /^The pre-run check found 1 problem, so nothing ran:\n {2}line \d+, col \d+: /,
      );
      assert.equal(r.stdout, "");
    }
  }, configFor());
  assert.deepEqual(
    h.calls,
    [],
    "no planted program called anything: the write before each error never went out",
  );
});

Deno.test("a program that saves a skill may import it: skills it saves are known only once it runs", async () => {
  const h = host();
  const programs = [
    `from mcp import runtime
await runtime.save_skill("double", "def run(x):\\n    return 2 * x\\n", "Doubles a number")
from skills import double
double.run(21)`,
    `from mcp import runtime
await runtime.save_skill("todo-counter", "def other(x):\\n    return x\\n")
from skills.todo_counter import other
other(1)`,
  ];
  await withPython(async (python) => {
    const cell = await python.execute(findingsCell(programs), { answer: h.answer });
    assert.equal(cell.done.status, "ok", cell.done.error);
    assert.deepEqual(JSON.parse(cell.stdout), [[], []]);
  }, configFor());
});

Deno.test("the error text lists each finding with its line, the code under a caret and the fix", async () => {
  const h = host();
  await withPython(async (python) => {
    const r = await python.execute(
      'await mcp_notes.add_note(text="kept")\nx = await mcp_filesystem.wrte_file(path="/tmp/a", content="x")',
      { answer: h.answer },
    );
    assert.equal(
      r.done.error,
      "The pre-run check found 1 problem, so nothing ran:\n" +
        '  line 2, col 11: mcp_filesystem.wrte_file(...): server "filesystem" has no tool "wrte_file" ' +
        "[unknown-tool]\n" +
        '      x = await mcp_filesystem.wrte_file(path="/tmp/a", content="x")\n' +
        "                ^\n" +
        "    fix: did you mean mcp_filesystem.write_file(...) or mcp_filesystem.read_text_file(...) or " +
        "mcp_filesystem.read_multiple_files(...)?\n" +
        "Nothing was called. Fix these and run again; if a finding is wrong, `# codemode: nocheck` as the " +
        "first line skips the check.\n",
    );
    assert.deepEqual(r.done.check, [{
      line: 2,
      col: 11,
      kind: "unknown-tool",
      message: 'mcp_filesystem.wrte_file(...): server "filesystem" has no tool "wrte_file"',
      fix: "did you mean mcp_filesystem.write_file(...) or mcp_filesystem.read_text_file(...) or " +
        "mcp_filesystem.read_multiple_files(...)?",
    }]);
  }, configFor());
  assert.deepEqual(h.calls, []);
});

Deno.test("`# codemode: nocheck` and CODEMODE_PRECHECK=off run the program as written", async () => {
  const code = 'await mcp_notes.add_note(text="one")\nawait mcp_everything.get_sum(a="five", b=2)';
  const h = host();
  await withPython(async (python) => {
    const r = await python.execute(`# codemode: nocheck\n${code}`, { answer: h.answer });
    assert.equal(r.done.status, "ok", r.done.error);
    assert.equal(r.done.check, undefined);
  }, configFor());
  await withPython(async (python) => {
    const r = await python.execute(code, { answer: h.answer });
    assert.equal(r.done.status, "ok", r.done.error);
    assert.equal(r.rpcs.some((f) => f.method === "check_calls"), false);
  }, configFor(undefined, { precheck: "off" }));
  assert.deepEqual(h.calls, ["notes/add_note", "everything/get-sum", "notes/add_note", "everything/get-sum"]);
});

Deno.test("a syntax error keeps Python's text and caret and adds its finding", async () => {
  await withPython(async (python) => {
    const r = await python.execute("x = 1\nprint((x)\n");
    assert.equal(r.done.status, "error");
    assert.match(r.done.error ?? "", /line 2\n {4}print\(\(x\)\n {9}\^\nSyntaxError: '\(' was never closed/);
    assert.deepEqual(r.done.check, [{
      line: 2,
      col: 6,
      kind: "syntax",
      message: "SyntaxError: '(' was never closed",
      fix: "correct the syntax at line 2, column 6, where the caret points",
    }]);
  }, configFor());
});

Deno.test("a program without tool calls costs the check no round trip; one with calls, exactly one", async () => {
  const h = host();
  await withPython(async (python) => {
    const plain = await python.execute("sum(range(10))", { answer: h.answer });
    assert.deepEqual(plain.rpcs, []);
    const calls = await python.execute(
      'a = await mcp_notes.count_notes()\nb = await mcp_everything.echo(message="x")',
      { answer: h.answer },
    );
    assert.equal(calls.rpcs.filter((f) => f.method === "check_calls").length, 1);
    assert.equal(calls.rpcs[0].method, "check_calls", "the check comes before any call");
  }, configFor());
});

Deno.test("a host that cannot check lets the program run", async () => {
  const h = host();
  await withPython(async (python) => {
    const r = await python.execute('await mcp_notes.add_note(text="one")', {
      answer: (rpc) =>
        rpc.method === "check_calls"
          ? { error: { type: "NotImplementedError", message: "old host" } }
          : h.answer(rpc),
    });
    assert.equal(r.done.status, "ok", r.done.error);
  }, configFor());
  assert.deepEqual(h.calls, ["notes/add_note"]);
});
