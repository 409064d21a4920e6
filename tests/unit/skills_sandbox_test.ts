/**
 * The sandbox side of skills, run with the host's python3 (no container): the `skills` importer fetching
 * code over RPC, tracebacks into skill code, the import-time check, and save_skill taking a function or
 * class defined in an earlier cell. The last tests put the host's own skill RPC methods and policy (a real
 * skill store in a temp directory, a fake pool) behind the runtime.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { toolDoc } from "../../core/catalog/docs.ts";
import { Policy } from "../../core/config/policy.ts";
import { sandboxApi } from "../../core/host_api/api.ts";
import { pythonErrorType } from "../../core/host_api/rpc.ts";
import { SkillStore } from "../../core/skills/store.ts";
import { skillRoots } from "../../core/skills/sources.ts";
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

const ECHO: Tool = {
  name: "echo",
  inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
};
/** The runtime's config for these tests: one server, "everything" (no pre-run check: the calls are the test). */
const EVERYTHING = {
  max_output: 1024 * 1024,
  servers: [{ name: "everything", alias: "everything", description: "Test server" }],
  precheck: "off" as const,
};

/**
 * The host's RPC methods over a real skill store (saves go to a temp HOME) with `skills` in the user's
 * skills directory, a pool that records the tool calls reaching it, and `policy`; the notes runs get.
 */
async function realHost(skills: Record<string, string>, policy = new Policy()) {
  const root = mkdtempSync(join(tmpdir(), "codemode-skills-sandbox-"));
  const roots = skillRoots({ cwd: root, env: { HOME: join(root, "home") } });
  for (const [name, code] of Object.entries(skills)) {
    mkdirSync(join(roots[1].path, name), { recursive: true });
    writeFileSync(
      join(roots[1].path, name, "SKILL.md"),
      `---\nname: ${name}\ndescription: Test skill\n---\n`,
    );
    writeFileSync(join(roots[1].path, name, "skill.py"), code);
  }
  const store = await SkillStore.open({ roots, mode: "rw" });
  const calls: string[] = [];
  const pool = {
    names: () => ["everything"],
    spec: (name: string) =>
      ({
        name,
        transport: "stdio",
        command: "x",
        source: { plugin: "t", file: "/f", key: name },
      }) as ServerSpec,
    listTools: () => Promise.resolve([ECHO]),
    callTool: (server: string, tool: string, args: Record<string, unknown>) => {
      calls.push(`${server}/${tool}`);
      return Promise.resolve(
        { content: [{ type: "text", text: `Echo: ${args.message}` }] } as CallToolResult,
      );
    },
  };
  const docs = { search: () => [], docs: () => [toolDoc("everything", ECHO)] };
  const handler = sandboxApi(pool, docs, { unwrap: (r) => r, raw: (r) => r }, policy, {
    mode: "rw",
    store: () => Promise.resolve(store),
    upstream: { readSkill: () => Promise.reject(new RangeError("No upstream skills here")) },
    skillDocs: () => [],
    toolDocs: (server) => Promise.resolve(server === "everything" ? [toolDoc(server, ECHO)] : undefined),
  });
  const notes: string[] = [];
  const context = { session: "s", signal: new AbortController().signal, note: (t: string) => notes.push(t) };
  // As the session does (core/sandbox/session.ts): a thrown error reaches Python as its pythonErrorType.
  const answer = async (rpc: RpcFrame): Promise<RpcAnswer> => {
    try {
      return { value: (await handler(rpc.method, rpc.params, context)) ?? null };
    } catch (error) {
      return { error: { type: pythonErrorType(error), message: (error as Error).message } };
    }
  };
  return { answer, calls, notes, store, userDir: roots[1].path };
}

Deno.test("a skill's tool call the policy denies raises PermissionError in the skill and never reaches the server", async () => {
  const { answer, calls, notes } = await realHost(
    {
      "tide-tables": [
        "async def predict(port):",
        "    return await mcp_everything.echo(message=port)",
        "",
        "async def careful(port):",
        "    try:",
        "        return await mcp_everything.echo(message=port)",
        "    except PermissionError as error:",
        "        return f'refused: {error}'",
        "",
      ].join("\n"),
    },
    new Policy({ denyTools: ["everything/echo"] }, { denyTools: "CODEMODE_DENY_TOOLS" }),
  );
  const reason = 'Tool "everything/echo" is denied by policy (CODEMODE_DENY_TOOLS has "everything/echo")';
  await withPython(async (python) => {
    const caught = await python.execute("from skills import tide_tables\nawait tide_tables.careful('Oslo')", {
      answer,
    });
    assert.equal(caught.done.status, "ok", caught.done.error);
    assert.equal(caught.done.value, `'refused: ${reason}'`);
    // The import-time check saw the refusal coming, in both calls.
    assert.deepEqual(notes, [
      `skill "tide-tables" line 2: mcp_everything.echo(...): ${reason}`,
      `skill "tide-tables" line 6: mcp_everything.echo(...): ${reason}`,
    ]);
    const raised = await python.execute("await tide_tables.predict('Oslo')", { answer });
    assert.equal(raised.done.status, "error");
    assert.match(raised.done.error!, /File "<skill tide-tables>", line 2, in predict\n/);
    assert.ok(raised.done.error!.endsWith(`PermissionError: ${reason}\n`), raised.done.error);
  }, EVERYTHING);
  assert.deepEqual(calls, [], "no refused call reached the server");
});

Deno.test("code that does not compile, saved through a forged save_skill RPC, fails to import with a SyntaxError naming the skill", async () => {
  const { answer, store, userDir } = await realHost({});
  await withPython(async (python) => {
    // The compile check is save_skill's, in the sandbox: the raw RPC skips it, and the host (which runs no
    // Python) stores the code.
    const forged = await python.execute(
      "from codemode_runtime import context\n" +
        "(await context.current().rpc.call('save_skill', " +
        "{'name': 'bad-one', 'code': 'def f(:\\n    pass\\n', 'description': 'Forged'}))['name']",
      { answer },
    );
    assert.equal(forged.done.status, "ok", forged.done.error);
    assert.equal(forged.done.value, "'bad-one'");
    assert.ok(store.find("bad-one"), `saved under ${userDir}`);
    for (const code of ["from skills import bad_one", "import skills.bad_one"]) {
      const r = await python.execute(code, { answer });
      assert.equal(r.done.status, "error");
      assert.match(
        r.done.error!,
        /File "<skill bad-one>", line 1\n {4}def f\(:\n *\^\nSyntaxError: invalid syntax\n$/,
      );
      assert.ok(!/codemode_runtime|sandbox\/mcp|_skills\.py/.test(r.done.error!), r.done.error);
      assert.deepEqual(r.rpcs.map((x) => x.method), ["read_skill"], "nothing to check, nothing run");
    }
    // The session and the other skill methods carry on; the skill lists with no functions.
    const listed = await python.execute("from mcp import runtime\nawait runtime.list_skills()", { answer });
    assert.equal(listed.done.status, "ok", listed.done.error);
    assert.equal(
      listed.done.value,
      "[{'name': 'bad-one', 'module': 'bad_one', 'description': 'Forged', 'functions': []}]",
    );
  }, EVERYTHING);
});
