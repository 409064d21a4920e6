/**
 * The skills suite, run against one runtime (podman, docker, pyodide): a real `codemode serve` under the
 * SDK client with server-everything and server-memory from npm, and the real CLI. A skill saved in one
 * serve is imported and called in the next; search and `codemode search` find it; `codemode skills check`
 * reports drift; bad saves are refused and write nothing.
 * @module
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { SkillsClient } from "@modelcontextprotocol/client/ext/skills";
import { fakeHome, ROOT, serve, type Served } from "./_serve.ts";

/** What `codemode <args>` printed and how it exited. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI from source in `home` (as HOME and working directory). */
export function cli(home: string, args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      join(ROOT, "node_modules/.bin/deno"),
      ["run", "-A", "--quiet", join(ROOT, "cli.ts"), ...args],
      {
        cwd: home,
        env: {
          PATH: process.env.PATH ?? "",
          HOME: home,
          CODEMODE_STATE_DIR: join(home, "state"),
          CODEMODE_LOG_LEVEL: "error",
          NO_COLOR: "1",
          ...env,
        },
        timeout: 240_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** Every file and folder under `home` that a skill save could have written (state and caches left out). */
export function writtenUnder(home: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const rel = relative(home, path);
      if (["state", ".cache", "memory.jsonl"].includes(rel)) continue;
      out.push(rel);
      if (entry.isDirectory()) walk(path);
    }
  };
  walk(home);
  return out.sort();
}

const SHOUT = `
async def shout(message: str) -> str:
    """Echoes a message in capital letters through server-everything."""
    return await mcp_everything.echo(message=message.upper())

async def add(a: int, b: int) -> str:
    """Adds two numbers with server-everything's get-sum."""
    from mcp.servers.everything import get_sum
    return await get_sum(a=a, b=b)
`;

const DRIFTY = `async def broken():
    await mcp_everything.no_such_tool()
    await mcp_everything.echo(message="x", loudness=3)
`;

/** Registers the suite's tests for `runtime`; ignored when it is not `usable`. */
export function skillsSuite(runtime: "podman" | "docker" | "pyodide", usable: boolean): void {
  const home = fakeHome();
  const env = { CODEMODE_RUNTIME: runtime, CODEMODE_TIMEOUT: "90" };
  let later: Served | undefined;
  const test = (name: string, fn: () => Promise<void>) =>
    Deno.test({
      name: `${runtime}: ${name}`,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      fn,
    });

  test("a skill saved in one serve is imported and called in the next, and its tool calls reach server-everything", async () => {
    const first = await serve(env, home);
    try {
      const defined = await first.run(SHOUT, 90);
      assert.equal(defined.isError, false, defined.text);
      // One skill from a function defined in the earlier cell, one from a string, one that drifted.
      const saved = await first.run(
        `from mcp import runtime
(await runtime.save_skill("louder", shout, "Shout a message back"),
 await runtime.save_skill("shout_it", ${JSON.stringify(SHOUT)}, "Echo a message in capital letters"),
 await runtime.save_skill("drifty", ${JSON.stringify(DRIFTY)}, "Calls a tool that is gone"))`,
        90,
      );
      assert.equal(saved.isError, false, saved.text);
      assert.match(saved.text, /'name': 'shout-it', 'module': 'shout_it'/);
    } finally {
      await first.close();
    }
    const folder = join(home, ".config", "codemode", "skills", "louder");
    assert.ok(existsSync(join(folder, "SKILL.md")) && existsSync(join(folder, "skill.py")));
    assert.match(readFileSync(join(folder, "skill.py"), "utf8"), /^async def shout\(message: str\) -> str:/);

    later = await serve(env, home);
    const r = await later.run(
      `from skills import shout_it, louder
from skills.shout_it import add
(await shout_it.shout("hi"), await add(2, 3), await louder.shout("again"))`,
      90,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(r.structured.value, "('Echo: HI', 'The sum of 2 and 3 is 5.', 'Echo: AGAIN')");
    assert.equal(r.structured.notes, undefined, "a skill without drift adds no note");
  });

  test("importing a skill whose calls drifted runs the check and its findings become notes", async () => {
    const s = later ?? await serve(env, home);
    const r = await s.run("import skills.drifty\nskills.drifty.__doc__", 90);
    assert.equal(r.isError, false, r.text);
    const notes = (r.structured.notes ?? []) as string[];
    assert.ok(notes.some((n) => /skill "drifty" line 2: .*has no tool "no_such_tool"/.test(n)), r.text);
    assert.ok(notes.some((n) => /skill "drifty" line 3: .*takes no argument "loudness"/.test(n)), r.text);
  });

  test("search_tool_docs and codemode search find the skill, and MCP clients get it through the skills extension", async () => {
    const s = later ?? await serve(env, home);
    const r = await s.run(
      `from mcp import runtime
hits = await runtime.search_tool_docs("capital letters", limit=3, detail="full")
skill = [h for h in hits if h.get("kind") == "skill"][0]
(skill["server"], skill["tool"], skill["description"], [f["name"] for f in skill["functions"]])`,
      90,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(
      r.structured.value,
      "('skills', 'shout-it', 'Echo a message in capital letters', ['shout', 'add'])",
    );
    const search = await cli(home, ["search", "capital", "letters", "--json"]);
    assert.equal(search.code, 0, search.stderr);
    const hits = JSON.parse(search.stdout) as { server: string; tool: string; kind?: string }[];
    assert.deepEqual(hits[0], { ...hits[0], server: "skills", tool: "shout-it", kind: "skill" });
    const listing = await new SkillsClient(s.client).list();
    assert.deepEqual(listing.skills.map((x) => x.uri).sort(), [
      "skill://drifty/SKILL.md",
      "skill://louder/SKILL.md",
      "skill://shout-it/SKILL.md",
    ]);
  });

  test("codemode skills check reports a call to a tool the server lacks and an argument it does not take", async () => {
    const r = await cli(home, ["skills", "check", "--json"], env);
    assert.equal(r.code, 1, r.stderr);
    const report = JSON.parse(r.stdout) as {
      skills: number;
      findings: { skill: string; file: string; line: number; kind: string }[];
    };
    assert.equal(report.skills, 3);
    assert.deepEqual(report.findings.map((f) => [f.skill, f.line, f.kind]), [
      ["drifty", 2, "unknown-tool"],
      ["drifty", 3, "unknown-argument"],
    ]);
    assert.ok(report.findings[0].file.endsWith(join("skills", "drifty", "skill.py")));
    const text = await cli(home, ["skills", "check"], env);
    assert.equal(text.code, 1);
    assert.match(
      text.stdout,
      /drifty\/skill\.py:2: mcp_everything\.no_such_tool\(\.\.\.\): server "everything" has no tool/,
    );
  });

  test("a save with a bad name, bad code, a path in the name or 300 KiB is refused and nothing is written", async () => {
    const s = later ?? await serve(env, home);
    const before = writtenUnder(home);
    const r = await s.run(
      `from mcp import runtime
outcomes = []
for name, code in [("Bad_Name", "def f(): pass"), ("../escape", "def f(): pass"), ("nested/path", "def f(): pass"),
                   ("fine-name", "def f(:\\n"), ("big", "def f(): pass\\n" + "#" * (300 * 1024))]:
    try:
        await runtime.save_skill(name, code, "should never be written")
        outcomes.append((name, "saved"))
    except ValueError as error:
        outcomes.append((name, "ValueError"))
outcomes`,
      90,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(
      r.structured.value,
      "[('Bad_Name', 'ValueError'), ('../escape', 'ValueError'), ('nested/path', 'ValueError'), " +
        "('fine-name', 'ValueError'), ('big', 'ValueError')]",
    );
    assert.deepEqual(writtenUnder(home), before, "the refused saves wrote nothing");
    await s.close();
  });
}
