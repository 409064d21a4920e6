/**
 * The sandbox side of skills, run with the host's python3 (no container): the `skills` importer fetching
 * code over RPC, tracebacks into skill code, the import-time check, and save_skill taking a function or
 * class defined in an earlier cell.
 */
import assert from "node:assert/strict";
import type { RpcAnswer, RpcFrame } from "./_local_python.ts";
import { withPython } from "./_local_python.ts";

interface FakeSkill {
  code: string | null;
  description: string;
}

/** A host that serves `skills` and records saves. */
function host(skills: Record<string, FakeSkill>, saved: Record<string, unknown>[] = []) {
  return (rpc: RpcFrame): RpcAnswer => {
    const name = String(rpc.params.name ?? "").replaceAll("_", "-");
    switch (rpc.method) {
      case "read_skill": {
        const skill = skills[name];
        if (!skill) return { error: { type: "KeyError", message: `No skill named "${name}"` } };
        return {
          value: {
            name,
            module: name.replaceAll("-", "_"),
            description: skill.description,
            code: skill.code,
            digest: `d-${name}`,
          },
        };
      }
      case "list_skills":
        return {
          value: Object.entries(skills).map(([n, s]) => ({
            name: n,
            module: n.replaceAll("-", "_"),
            description: s.description,
            has_code: s.code !== null,
            digest: `d-${n}`,
          })),
        };
      case "check_skill_calls":
        return { value: [] };
      case "call_tool":
        return { value: `called ${rpc.params.tool} with ${JSON.stringify(rpc.params.arguments)}` };
      case "save_skill":
        saved.push(rpc.params);
        return { value: { name: rpc.params.name } };
      case "search_tool_docs":
        return {
          value: [{ server: "skills", tool: "tide-tables", description: "Tides", score: 1, kind: "skill" }],
        };
      default:
        return { error: { type: "RuntimeError", message: `Unexpected ${rpc.method}` } };
    }
  };
}

const TIDES: Record<string, FakeSkill> = {
  "tide-tables": {
    code: [
      '"""Tide tables."""',
      "async def predict(port: str) -> str:",
      '    """High water for a port."""',
      "    return await mcp_my_server.echo(message=port)",
      "",
      "def broken():",
      "    raise ValueError('no tide today')",
      "",
    ].join("\n"),
    description: "Predict high water",
  },
  "field-guide": { code: null, description: "Only words" },
};

Deno.test("from skills import <name> fetches the code once and its tool calls reach the host", async () => {
  await withPython(async (python) => {
    const answer = host(TIDES);
    const r = await python.execute(
      "from skills import tide_tables\nfrom skills.tide_tables import predict\n" +
        "(await tide_tables.predict('Oslo'), predict is tide_tables.predict, tide_tables.__doc__)",
      { answer },
    );
    assert.equal(r.done.status, "ok", r.done.error);
    assert.equal(r.done.value, `('called echo with {"message":"Oslo"}', True, 'Tide tables.')`);
    assert.deepEqual(r.rpcs.map((x) => x.method), ["read_skill", "check_skill_calls", "call_tool"]);
    assert.deepEqual(r.rpcs[1].params, {
      skill: "tide-tables",
      calls: [{ line: 4, server: "my_server", tool: "echo", via: "proxy", keywords: ["message"] }],
    });
    const again = await python.execute("import skills.tide_tables\n1", { answer });
    assert.deepEqual(again.rpcs, [], "a second import is served from sys.modules");
  });
});

Deno.test("a traceback through skill code shows the skill's lines and no runtime frames", async () => {
  await withPython(async (python) => {
    const r = await python.execute("from skills.tide_tables import broken\nbroken()", {
      answer: host(TIDES),
    });
    assert.equal(r.done.status, "error");
    assert.equal(
      r.done.error,
      "Traceback (most recent call last):\n" +
        '  File "<run_python>", line 2, in <module>\n    broken()\n' +
        '  File "<skill tide-tables>", line 7, in broken\n' +
        "    raise ValueError('no tide today')\nValueError: no tide today\n",
    );
  });
});

Deno.test("a missing skill and a documentation skill fail to import with a clear message", async () => {
  await withPython(async (python) => {
    const missing = await python.execute("from skills import nope", { answer: host(TIDES) });
    assert.match(
      missing.done.error!,
      /ModuleNotFoundError: No skill named "nope"; runtime\.list_skills\(\) lists them/,
    );
    assert.ok(!missing.done.error!.includes("importlib"), missing.done.error);
    const docs = await python.execute("import skills.field_guide", { answer: host(TIDES) });
    assert.match(docs.done.error!, /ImportError: Skill 'field-guide' has no code: it is documentation/);
    const listed = await python.execute(
      "import skills\nsorted(n for n in dir(skills) if not n.startswith('_'))",
      {
        answer: host(TIDES),
      },
    );
    assert.equal(listed.done.value, "['field_guide', 'tide_tables']");
  });
});

Deno.test("save_skill takes a function or class from an earlier cell, with decorators and indentation", async () => {
  await withPython(async (python) => {
    const saved: Record<string, unknown>[] = [];
    const answer = host({}, saved);
    await python.execute(
      [
        "import functools",
        "x = 1",
        "@functools.lru_cache",
        "def double(n: int) -> int:",
        '    """Doubles n."""',
        "    return n * 2",
        "",
        "if True:",
        "    async def nested(path):",
        "        return await mcp_my_server.echo(message=path)",
        "",
        "class Tally:",
        '    """Counts."""',
        "    def __init__(self, start=0):",
        "        self.n = start",
      ].join("\n"),
      { answer },
    );
    await python.execute("y = 2", { answer });
    const r = await python.execute(
      "from mcp import runtime\n" +
        "await runtime.save_skill('doubler', double, 'Doubles')\n" +
        "await runtime.save_skill('nested', nested, 'Nested')\n" +
        "runtime.save_skill_sync('tally', Tally, 'Tally', overwrite=True)",
      { answer },
    );
    assert.equal(r.done.status, "ok", r.done.error);
    assert.equal(
      saved[0].code,
      '@functools.lru_cache\ndef double(n: int) -> int:\n    """Doubles n."""\n    return n * 2\n',
    );
    assert.deepEqual((saved[0].functions as { name: string }[]).map((f) => f.name), ["double"]);
    assert.equal(
      saved[1].code,
      "async def nested(path):\n    return await mcp_my_server.echo(message=path)\n",
    );
    assert.deepEqual(saved[1].servers, ["my-server"]);
    assert.equal(
      saved[2].code,
      'class Tally:\n    """Counts."""\n    def __init__(self, start=0):\n        self.n = start\n',
    );
    assert.equal(saved[2].overwrite, true);
  });
});

Deno.test("save_skill refuses a lambda, code that does not compile, and code without a public function", async () => {
  await withPython(async (python) => {
    const saved: Record<string, unknown>[] = [];
    const answer = host({}, saved);
    const cases: [string, RegExp][] = [
      ["await runtime.save_skill('l', lambda: 1, 'd')", /ValueError: A lambda cannot be saved as a skill/],
      [
        "await runtime.save_skill('s', 'def f(:', 'd')",
        /ValueError: The code of skill 's' does not compile: line 1/,
      ],
      [
        "await runtime.save_skill('n', 'X = 1', 'd')",
        /ValueError: The code of skill 'n' defines no public function/,
      ],
      ["await runtime.save_skill('p', 42, 'd')", /TypeError: save_skill takes code as a string/],
      [
        "await runtime.save_skill('b', 'def f(): pass', None)",
        /TypeError: A skill description must be a string/,
      ],
    ];
    for (const [code, pattern] of cases) {
      const r = await python.execute(`from mcp import runtime\n${code}`, { answer });
      assert.match(r.done.error ?? "", pattern, code);
    }
    assert.deepEqual(saved, [], "nothing reached the host");
  });
});

Deno.test("list_skills, search with detail='full' and capability_summary show skills with their functions", async () => {
  await withPython(async (python) => {
    const answer = host(TIDES);
    const r = await python.execute(
      "from mcp import runtime\n" +
        "listed = await runtime.list_skills()\n" +
        "hits = await runtime.search_tool_docs('tide', detail='full')\n" +
        "(listed[0]['functions'][0]['signature'], hits[0]['functions'][1]['name'], hits[0]['module'], " +
        "runtime.capability_summary().split('Saved skills: ')[1])",
      { answer },
    );
    assert.equal(r.done.status, "ok", r.done.error);
    assert.equal(
      r.done.value,
      "('(port: str) -> str', 'broken', 'tide_tables', 'tide_tables (Predict high water); field_guide (Only words).')",
    );
  });
});
