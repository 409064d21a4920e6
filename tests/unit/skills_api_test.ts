/**
 * The skill RPC methods sandbox code calls, over a real skill store in a temp directory and a fake pool:
 * names never become paths, skills off means every method refuses, the import check's findings become
 * notes, and skill hits survive the policy filter of search.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { sandboxApi, type SkillsOptions, type ToolCaller } from "../../core/host_api/api.ts";
import { Policy } from "../../core/config/policy.ts";
import { RpcError } from "../../core/host_api/rpc.ts";
import { type ToolDoc, toolDoc } from "../../core/catalog/docs.ts";
import type { SearchHit } from "../../core/catalog/index.ts";
import { SkillStore } from "../../core/skills/store.ts";
import { skillRoots } from "../../core/skills/sources.ts";

const ECHO: Tool = {
  name: "echo",
  inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
};

const pool: ToolCaller = {
  names: () => ["everything"],
  spec: (name) =>
    ({
      name,
      transport: "stdio",
      command: "x",
      source: { plugin: "t", file: "/f", key: name },
    }) as ServerSpec,
  listTools: () => Promise.resolve([ECHO]),
  callToolReply: () => Promise.resolve({ result: { content: [] } as CallToolResult }),
};

async function setup(mode: "rw" | "ro" | "off" = "rw", policy = new Policy()) {
  const root = mkdtempSync(join(tmpdir(), "codemode-skills-api-"));
  const cwd = join(root, "project");
  mkdirSync(cwd);
  const roots = skillRoots({ cwd, env: { HOME: join(root, "home") } });
  mkdirSync(join(roots[1].path, "tide-tables"), { recursive: true });
  writeFileSync(
    join(roots[1].path, "tide-tables", "SKILL.md"),
    "---\nname: tide-tables\ndescription: Tides\n---\n",
  );
  writeFileSync(join(roots[1].path, "tide-tables", "skill.py"), "def predict(port): pass\n");
  writeFileSync(join(root, "secret.txt"), "host secret");
  const store = mode === "off" ? undefined : await SkillStore.open({ roots, mode });
  const hits: SearchHit[] = [
    { server: "skills", tool: "tide-tables", description: "Tides", score: 0.9, kind: "skill" },
    { server: "everything", tool: "echo", description: "Echo", score: 0.5 },
  ];
  const skills: SkillsOptions = {
    mode,
    store: () => Promise.resolve(store),
    upstream: {
      readSkill: (server, skill) =>
        skill === "guide"
          ? Promise.resolve({ text: `# guide of ${server}`, files: ["SKILL.md"] })
          : Promise.reject(new RangeError(`MCP server "${server}" publishes no skill "${skill}"`)),
    },
    skillDocs: () => [{ server: "skills", tool: "everything/guide", description: "A guide", kind: "skill" }],
    toolDocs: (server) => Promise.resolve(server === "everything" ? [toolDoc(server, ECHO)] : undefined),
  };
  const docs = {
    search: () => hits,
    docs: (server: string): ToolDoc[] => server === "everything" ? [toolDoc(server, ECHO)] : [],
  };
  const handler = sandboxApi(pool, docs, (reply) => reply.result, policy, skills);
  const notes: string[] = [];
  const call = (method: string, params: Record<string, unknown>) =>
    handler(method, params, {
      session: "s",
      signal: new AbortController().signal,
      note: (t) => notes.push(t),
    });
  return { root, roots, call, notes };
}

async function refusal(promise: Promise<unknown>): Promise<RpcError> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error instanceof RpcError, `expected a refusal, got ${error}`);
  return error;
}

Deno.test("read_skill returns SKILL.md and code by either spelling, and a published skill by <server>/<name>", async () => {
  const { call } = await setup();
  const local = await call("read_skill", { name: "tide_tables" }) as Record<string, unknown>;
  assert.equal(local.name, "tide-tables");
  assert.equal(local.code, "def predict(port): pass\n");
  assert.match(String(local.skill_md), /name: tide-tables/);
  assert.ok(!JSON.stringify(local).includes("/home/"), "no host path crosses");
  const upstream = await call("read_skill", { name: "everything/guide" }) as Record<string, unknown>;
  assert.equal(upstream.skill_md, "# guide of everything");
  assert.equal(upstream.description, "A guide");
});

Deno.test("read_skill never turns a name into a path, and names outside the catalog are KeyErrors", async () => {
  const { call } = await setup();
  for (
    const name of ["../secret.txt", "../../secret", "/etc/passwd", "tide-tables/../../secret.txt", "..", "."]
  ) {
    const error = await refusal(call("read_skill", { name }));
    assert.match(error.pythonType, /KeyError|ValueError/, name);
    assert.ok(!error.message.includes("host secret"));
  }
  assert.equal((await refusal(call("read_skill", { name: "nowhere/x" }))).pythonType, "KeyError");
  assert.equal((await refusal(call("read_skill", { name: "" }))).pythonType, "ValueError");
});

Deno.test("with skills off every skill method refuses, and search leaves skills out", async () => {
  const { call } = await setup("off");
  for (const method of ["list_skills", "read_skill", "save_skill", "check_skill_calls"]) {
    const error = await refusal(call(method, { name: "tide-tables", code: "def f(): pass", skill: "x" }));
    assert.equal(error.pythonType, "PermissionError");
    assert.match(error.message, /CODEMODE_SKILLS=off/);
  }
  const hits = await call("search_tool_docs", { query: "tide" }) as SearchHit[];
  assert.deepEqual(hits.map((h) => h.tool), ["echo"]);
});

Deno.test("save_skill refusals arrive as the Python exceptions sandbox code expects, and write nothing", async () => {
  const { call, roots } = await setup();
  const before = readdirSync(roots[1].path);
  const error = await refusal(call("save_skill", { name: "../x", code: "def f(): pass", description: "d" }));
  assert.equal(error.pythonType, "ValueError");
  const exists = await refusal(
    call("save_skill", { name: "tide_tables", code: "def f(): pass", description: "d" }),
  );
  assert.equal(exists.pythonType, "FileExistsError");
  assert.deepEqual(readdirSync(roots[1].path), before);
  const ro = await setup("ro");
  const denied = await refusal(
    ro.call("save_skill", { name: "new-one", code: "def f(): pass", description: "d" }),
  );
  assert.equal(denied.pythonType, "PermissionError");
});

Deno.test("check_skill_calls answers the findings and adds each as a note on the run", async () => {
  const { call, notes } = await setup();
  const findings = await call("check_skill_calls", {
    skill: "tide-tables",
    calls: [
      { line: 3, server: "everything", tool: "echo", keywords: ["message", "loud"], via: "proxy" },
      { line: 4, server: "everything", tool: "ech", keywords: [], via: "proxy" },
    ],
  });
  assert.deepEqual((findings as { line: number; kind: string }[]).map((f) => [f.line, f.kind]), [
    [3, "unknown-argument"],
    [4, "unknown-tool"],
  ]);
  assert.equal(notes.length, 2);
  assert.match(
    notes[0],
    /^skill "tide-tables" line 3: mcp_everything\.echo\(\.\.\.\): "echo" takes no argument "loud"/,
  );
});

Deno.test("skill hits survive a restrictive policy's filter, and list_skills shows published skills of allowed servers", async () => {
  const { call } = await setup("rw", new Policy({ readOnly: true }));
  const hits = await call("search_tool_docs", { query: "tide" }) as SearchHit[];
  assert.deepEqual(hits.map((h) => h.tool), ["tide-tables"], "echo is not annotated read-only");
  const listed = await call("list_skills", {}) as { name: string }[];
  assert.deepEqual(listed.map((s) => s.name), ["tide-tables", "everything/guide"]);
  const denied = await setup("rw", new Policy({ denyServers: ["everything"] }));
  assert.deepEqual((await denied.call("list_skills", {}) as { name: string }[]).map((s) => s.name), [
    "tide-tables",
  ]);
  assert.equal(
    (await refusal(denied.call("read_skill", { name: "everything/guide" }))).pythonType,
    "PermissionError",
  );
});
