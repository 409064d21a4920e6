/**
 * Skill attempts of the adversarial suite: skill names and files that try to leave the skills directory,
 * symlinked skills, a skill of one directory shadowing another's, and sandbox code fishing for host files
 * through `read_skill`, the `skills` importer and the raw RPC. `plantSkills` lays the traps in the serve's
 * HOME and project before it starts.
 * @module
 */
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { type Attempt, type Ctx, facts, type Fixtures } from "./_adversarial.ts";
import { SkillsClient } from "@modelcontextprotocol/client/ext/skills";

/** The user's and the project's skills directories under a serve's HOME (its working directory too). */
function skillDirs(home: string): { user: string; project: string } {
  return { user: join(home, ".config", "codemode", "skills"), project: join(home, ".codemode", "skills") };
}

function skill(dir: string, name: string, code: string, description = `The ${name} skill`): void {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(
    join(dir, name, "SKILL.md"),
    `---\nname: ${name}\ndescription: ${description}\n---\nUse ${name}.\n`,
  );
  writeFileSync(join(dir, name, "skill.py"), code);
}

/**
 * Plants the traps: a skill folder that is a symlink into the marker's directory, a skill whose skill.py
 * links the host marker file, a link to `/`, and `shadowed` in both the project and the user directory.
 */
export function plantSkills(home: string, fix: Fixtures): void {
  const { user, project } = skillDirs(home);
  skill(user, "innocent", "def answer():\n    return 42\n");
  skill(user, "shadowed", "def which():\n    return 'user'\n");
  skill(project, "shadowed", "def which():\n    return 'project'\n");
  const outside = join(fix.markerDir, "linked-skill");
  skill(
    fix.markerDir,
    "linked-skill",
    `SECRET = ${JSON.stringify(fix.markerText)}\ndef f():\n    return SECRET\n`,
  );
  symlinkSync(outside, join(user, "linked-skill"));
  mkdirSync(join(user, "leaky"));
  writeFileSync(join(user, "leaky", "SKILL.md"), "---\nname: leaky\ndescription: Leaks\n---\n");
  symlinkSync(fix.markerFile, join(user, "leaky", "skill.py"));
  symlinkSync("/", join(user, "escape-root"));
}

/** Every path under `dir` with the size of each file, to see that nothing was written or changed. */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      const rel = relative(dir, path);
      if (rel === "state" || rel === ".cache" || rel.startsWith("memory")) continue;
      out.push(entry.isFile() ? `${rel} ${readFileSync(path).length}` : rel);
      if (entry.isDirectory() && !entry.isSymbolicLink()) walk(path);
    }
  };
  walk(dir);
  return out.sort();
}

/** Names at the top of /tmp that an escaping save would have written. */
function escapesInTmp(): string[] {
  return readdirSync("/tmp").filter((name) => name.startsWith("escape")).sort();
}

function noMarker(ctx: Ctx, text: string): void {
  assert.ok(!text.includes(ctx.fix.markerText), `the host marker reached the sandbox: ${text.slice(0, 300)}`);
}

/** Skills: nothing a skill name, file or read can do reaches outside the skills directories. */
export const skills: Attempt[] = [
  {
    area: "skills",
    name: "a skill name with a path, dots, NUL or a scheme writes nothing anywhere",
    async steps(ctx) {
      const home = ctx.served.home;
      const before = [
        snapshot(home),
        snapshot(ctx.fix.markerDir),
        escapesInTmp(),
      ];
      const answer = await ctx.run(`
from mcp import runtime
names = ["../../../../tmp/escape-a", "/tmp/escape-b", "a/../../escape-c", "..", ".", ".hidden",
         "x\\x00y", "skill://escape-d", "..%2f..%2fescape-e", "innocent/../../escape-f", "C:\\\\escape-g",
         "ａｂｃ", "a" * 65, "-lead", "trail-", "escape\\n-h"]
outcomes = {}
for name in names:
    try:
        await runtime.save_skill(name, "def f():\\n    return 1\\n", "An escape attempt", overwrite=True)
        outcomes[name] = "saved"
    except Exception as error:
        outcomes[name] = type(error).__name__
report(outcomes=outcomes)`);
      const outcomes = facts(answer).outcomes as Record<string, string>;
      assert.deepEqual(
        Object.entries(outcomes).filter(([, v]) => v !== "ValueError"),
        [],
        "every name is refused",
      );
      assert.deepEqual(
        [snapshot(home), snapshot(ctx.fix.markerDir), escapesInTmp()],
        before,
        "nothing was written in the HOME, the marker's directory or /tmp",
      );
    },
  },
  {
    area: "skills",
    name: "read_skill, the skills importer and the raw RPC cannot read host files",
    code: `
from mcp import runtime
from codemode_runtime import context
names = ["../../../../etc/passwd", "/etc/passwd", FIX["markerFile"], "leaky", "linked-skill", "linked_skill",
         "escape-root", "escape_root", "innocent/../leaky", "skill://leaky/skill.py", "..%2f..%2fetc%2fpasswd",
         "everything/../../../etc/passwd", "../etc/SKILL.md", "innocent/../../../../" + FIX["markerFile"]]
results = {}
for name in names:
    try:
        results["read " + name] = repr(await runtime.read_skill(name))[:200]
    except Exception as error:
        results["read " + name] = type(error).__name__
    try:
        results["rpc " + name] = repr(await context.current().rpc.call("read_skill", {"name": name}))[:200]
    except Exception as error:
        results["rpc " + name] = type(error).__name__
for module in ["skills.leaky", "skills.linked_skill", "skills.escape_root", "skills.__init__"]:
    try:
        __import__(module)
        results["import " + module] = "imported"
    except Exception as error:
        results["import " + module] = type(error).__name__
report(results=results)`,
    check(answer, ctx) {
      const results = facts(answer).results as Record<string, string>;
      const read = Object.entries(results).filter(([, v]) =>
        !/^(KeyError|ValueError|PermissionError|ModuleNotFoundError|ImportError)$/.test(v)
      );
      assert.deepEqual(read, [], "every read and import fails with a clear error");
      noMarker(ctx, answer.text + JSON.stringify(answer.structured));
    },
  },
  {
    area: "skills",
    name: "symlinked skills are neither listed, searched, imported nor served to MCP clients",
    async steps(ctx) {
      const answer = await ctx.run(`
from mcp import runtime
listed = sorted(s["name"] for s in await runtime.list_skills() if "/" not in s["name"])
hits = [h["tool"] for h in await runtime.search_tool_docs("leaks linked escape", limit=20) if h.get("kind") == "skill"]
report(listed=listed, hits=hits)`);
      const found = facts(answer);
      assert.deepEqual(found.listed, ["innocent", "shadowed"]);
      assert.deepEqual((found.hits as string[]).filter((h) => h !== "innocent" && h !== "shadowed"), []);
      const served = await new SkillsClient(ctx.served.client).list();
      assert.deepEqual(served.skills.map((s) => s.uri).sort(), [
        "skill://innocent/SKILL.md",
        "skill://shadowed/SKILL.md",
      ]);
      noMarker(ctx, answer.text);
    },
  },
  {
    area: "skills",
    name: "a project skill shadows the user's skill of that name, and a save cannot replace or unshadow it",
    async steps(ctx) {
      const { user } = skillDirs(ctx.served.home);
      const before = readFileSync(join(user, "shadowed", "skill.py"), "utf8");
      const answer = await ctx.run(`
from mcp import runtime
from skills import shadowed
try:
    await runtime.save_skill("shadowed", "def which():\\n    return 'sandbox'\\n", "Replaced", overwrite=True)
    saved = "saved"
except Exception as error:
    saved = type(error).__name__
report(which=shadowed.which(), saved=saved, read=(await runtime.read_skill("shadowed"))["code"])`);
      const found = facts(answer);
      assert.equal(found.which, "project");
      assert.equal(found.saved, "FileExistsError");
      assert.match(String(found.read), /'project'/);
      assert.equal(
        readFileSync(join(user, "shadowed", "skill.py"), "utf8"),
        before,
        "the user's copy is untouched",
      );
    },
  },
  {
    area: "skills",
    name: "a saved skill that opens a host path runs in the sandbox and cannot read it",
    code: `
from mcp import runtime
import importlib, sys
code = "def peek(path):\\n    with open(path) as f:\\n        return f.read()\\n"
await runtime.save_skill("peeker", code, "Reads a path", overwrite=True)
sys.modules.pop("skills.peeker", None)
peeker = importlib.import_module("skills.peeker")
report(results={path: attempt(lambda: peeker.peek(path)) for path in [FIX["markerFile"], "/etc/shadow"]})`,
    check(answer, ctx) {
      const results = facts(answer).results as Record<string, string>;
      assert.equal(results[ctx.fix.markerFile], "ENOENT");
      assert.notEqual(results["/etc/shadow"], "allowed");
      noMarker(ctx, answer.text);
    },
  },
  {
    area: "skills",
    name: "oversized and malformed saves are refused and the server keeps serving",
    code: `
from mcp import runtime
from codemode_runtime import context
results = {}
for label, name, code, description in [
    ("20 MiB of code", "huge", "def f(): pass\\n" + "#" * (20 * 1024 * 1024), "Huge"),
    ("300 KiB of code", "big", "def f(): pass\\n" + "#" * (300 * 1024), "Big"),
    ("a 2,000-character description", "wordy", "def f(): pass\\n", "w" * 2000),
    ("control characters", "ctrl", "def f(): pass\\n", "bell\\x07"),
]:
    try:
        await runtime.save_skill(name, code, description)
        results[label] = "saved"
    except Exception as error:
        results[label] = type(error).__name__
for label, params in [("no params", {}), ("code as a list", {"name": "x", "code": ["a"], "description": "d"}),
                      ("functions garbage", {"name": "garbage", "code": "def f(): pass", "description": "d",
                                             "functions": [{"name": 1}, "nope", None] * 1000}),
                      ("servers garbage", {"name": "garbage2", "code": "def f(): pass", "description": "d",
                                           "servers": [{"$": 1}, "x" * 10000]})]:
    try:
        results[label] = repr(await context.current().rpc.call("save_skill", params))[:120]
    except Exception as error:
        results[label] = type(error).__name__
report(results=results)`,
    check(answer) {
      const results = facts(answer).results as Record<string, string>;
      assert.equal(results["20 MiB of code"], "ValueError");
      assert.equal(results["300 KiB of code"], "ValueError");
      assert.equal(results["a 2,000-character description"], "ValueError");
      assert.equal(results["control characters"], "ValueError");
      assert.equal(results["no params"], "ValueError");
      assert.equal(results["code as a list"], "ValueError");
      // Garbage metadata is dropped, not obeyed: the skill itself is fine.
      assert.match(results["functions garbage"], /'name': 'garbage'/);
    },
  },
];
