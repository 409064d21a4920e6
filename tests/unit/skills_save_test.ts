/**
 * Saving and removing skills on real directories: the name rule and its two spellings, the 256 KiB cap,
 * overwrite, a project skill that would shadow a save, read-only mode, and that a refused save writes
 * nothing anywhere.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { SkillStore } from "../../core/skills/store.ts";
import { skillRoots } from "../../core/skills/sources.ts";
import { removeSkill, SAVE_LIMIT_BYTES, saveSkill, SkillWriteError } from "../../core/skills/save.ts";

async function fixture(mode: "rw" | "ro" = "rw") {
  const root = mkdtempSync(join(tmpdir(), "codemode-save-"));
  const cwd = join(root, "project");
  mkdirSync(cwd);
  const roots = skillRoots({ cwd, env: { HOME: join(root, "home") } });
  const store = await SkillStore.open({ roots, mode });
  return { root, cwd, store, user: roots[1].path, project: roots[0].path };
}

/** Every path under `dir`, hidden ones included. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      out.push(relative(dir, join(d, entry.name)));
      if (entry.isDirectory()) walk(join(d, entry.name));
    }
  };
  walk(dir);
  return out.sort();
}

const CODE = "async def count(path: str) -> int:\n    return 1\n";

Deno.test("saveSkill() writes SKILL.md and skill.py under the hyphenated name and reloads the store", async () => {
  const f = await fixture();
  const saved = await saveSkill(f.store, {
    name: "todo_counter",
    code: CODE,
    description: "Counts TODO lines\nin a file",
    servers: ["filesystem"],
    functions: [{ name: "count", signature: "(path: str) -> int", doc: "Counts.", async: true }],
  });
  assert.deepEqual(saved, {
    name: "todo-counter",
    module: "todo_counter",
    uri: "skill://todo-counter/SKILL.md",
    replaced: false,
  });
  assert.equal(readFileSync(join(f.user, "todo-counter", "skill.py"), "utf8"), CODE);
  const manifest = readFileSync(join(f.user, "todo-counter", "SKILL.md"), "utf8");
  assert.match(manifest, /^---\nname: "todo-counter"\ndescription: "Counts TODO lines in a file"\n/);
  assert.match(manifest, /servers: \["filesystem"\]\nversion: 1\ncreated: "/);
  assert.match(manifest, /from skills import todo_counter\nawait todo_counter\.count\(\.\.\.\)/);
  assert.match(manifest, /- `async count\(path: str\) -> int`: Counts\./);
  const skill = f.store.find("todo-counter")!;
  assert.equal(skill.frontmatter.version, 1);
  assert.deepEqual(tree(f.user), ["todo-counter", "todo-counter/SKILL.md", "todo-counter/skill.py"]);
});

Deno.test("a bad name, bad description or code over 256 KiB is refused with a ValueError and nothing is written", async () => {
  const f = await fixture();
  const refusals: [string, string, string][] = [
    ["Upper", CODE, /lowercase letters/.source],
    ["two--hyphens", CODE, /lowercase letters/.source],
    ["two__underscores", CODE, /lowercase letters/.source],
    ["../escape", CODE, /Invalid skill name "..\/escape"/.source],
    ["a/b", CODE, /Invalid skill name "a\/b"/.source],
    ["/abs", CODE, /Invalid skill name/.source],
    ["..", CODE, /Invalid skill name/.source],
    ["", CODE, /Invalid skill name/.source],
    ["x".repeat(65), CODE, /at most 64 characters/.source],
    ["big", "x = 1\n" + "#".repeat(300 * 1024), /is 300\.\d KiB, over the 256 KiB cap/.source],
    ["empty", "   ", /is empty/.source],
  ];
  for (const [name, code, pattern] of refusals) {
    await assert.rejects(
      saveSkill(f.store, { name, code, description: "d" }),
      (e: unknown) =>
        e instanceof SkillWriteError && e.pythonType === "ValueError" && new RegExp(pattern).test(e.message),
      `name ${JSON.stringify(name).slice(0, 40)}`,
    );
  }
  await assert.rejects(
    saveSkill(f.store, { name: "ok", code: CODE, description: " " }),
    /needs a description/,
  );
  await assert.rejects(
    saveSkill(f.store, { name: "ok", code: CODE, description: "a\x00b" }),
    /control characters/,
  );
  assert.deepEqual(tree(f.root), ["project"], "nothing was written anywhere");
  assert.equal(SAVE_LIMIT_BYTES, 256 * 1024);
});

Deno.test("overwrite=False refuses an existing skill; overwrite=True replaces it and bumps its version", async () => {
  const f = await fixture();
  await saveSkill(f.store, { name: "tide", code: CODE, description: "First" });
  const created = f.store.find("tide")!.frontmatter.created;
  await assert.rejects(
    saveSkill(f.store, { name: "tide", code: "def g(): pass\n", description: "Second" }),
    (e: unknown) => e instanceof SkillWriteError && e.pythonType === "FileExistsError",
  );
  assert.equal(readFileSync(join(f.user, "tide", "skill.py"), "utf8"), CODE);
  const saved = await saveSkill(f.store, {
    name: "tide",
    code: "def g(): pass\n",
    description: "Second",
    overwrite: true,
  });
  assert.equal(saved.replaced, true);
  const skill = f.store.find("tide")!;
  assert.equal(skill.description, "Second");
  assert.equal(skill.frontmatter.version, 2);
  assert.equal(skill.frontmatter.created, created);
  assert.deepEqual(tree(f.user), ["tide", "tide/SKILL.md", "tide/skill.py"], "no temporary folder is left");
});

Deno.test("a save is refused when a project skill of that name would shadow it", async () => {
  const f = await fixture();
  mkdirSync(join(f.project, "shared"), { recursive: true });
  writeFileSync(join(f.project, "shared", "SKILL.md"), "---\nname: shared\ndescription: project\n---\n");
  await f.store.reload();
  await assert.rejects(
    saveSkill(f.store, { name: "shared", code: CODE, description: "d", overwrite: true }),
    /in the project skills directory takes precedence/,
  );
});

Deno.test("read-only mode refuses saves and removals", async () => {
  const f = await fixture("ro");
  await assert.rejects(
    saveSkill(f.store, { name: "ok", code: CODE, description: "d" }),
    (e: unknown) =>
      e instanceof SkillWriteError && e.pythonType === "PermissionError" &&
      /CODEMODE_SKILLS=ro/.test(e.message),
  );
  await assert.rejects(removeSkill(f.store, "ok"), /CODEMODE_SKILLS=ro/);
});

Deno.test("removeSkill() removes a loaded skill's folder and refuses an unknown name", async () => {
  const f = await fixture();
  await saveSkill(f.store, { name: "gone-soon", code: CODE, description: "d" });
  const removed = await removeSkill(f.store, "gone_soon");
  assert.equal(removed.name, "gone-soon");
  assert.deepEqual(tree(f.user), []);
  assert.equal(f.store.find("gone-soon"), undefined);
  await assert.rejects(removeSkill(f.store, "gone-soon"), /No skill named "gone-soon" is loaded/);
});

Deno.test("concurrent saves of one name: one wins, the other is refused, and no temporary folder is left", async () => {
  const f = await fixture();
  const results = await Promise.allSettled(
    [1, 2, 3].map((i) =>
      saveSkill(f.store, {
        name: "racy",
        code: `def f{i}(): pass\n`.replace("{i}", String(i)),
        description: `v${i}`,
      })
    ),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
  assert.deepEqual(tree(f.user), ["racy", "racy/SKILL.md", "racy/skill.py"]);
});

Deno.test("two stores sharing one skills directory (two nodes) save at once: every skill whole, a clash refused", async () => {
  const root = mkdtempSync(join(tmpdir(), "codemode-save-shared-"));
  const shared = join(root, "shared");
  const open = (name: string) =>
    SkillStore.open({ roots: skillRoots({ cwd: join(root, name), env: {}, userDir: shared }), mode: "rw" });
  const [a, b] = await Promise.all([open("a"), open("b")]);
  const save = (store: SkillStore, node: string, i: number) =>
    saveSkill(store, {
      name: `${node}-skill-${i}`,
      code: `X = ${JSON.stringify(node + i)}\n`,
      description: `${node} ${i}`,
    });
  await Promise.all(Array.from({ length: 20 }, (_, i) => [save(a, "a", i), save(b, "b", i)]).flat());
  assert.equal(readdirSync(shared).length, 40, "no temporary folder left, nothing lost");
  for (const node of ["a", "b"]) {
    for (let i = 0; i < 20; i++) {
      assert.equal(
        readFileSync(join(shared, `${node}-skill-${i}`, "skill.py"), "utf8"),
        `X = "${node}${i}"\n`,
      );
    }
  }
  await Promise.all([a.reload(), b.reload()]);
  assert.equal(a.skills().length, 40, "each node loads the other's skills");
  // The same new name from both at once: one wins whole, the other is told, nothing half-written stays.
  const clash = await Promise.allSettled([save(a, "same", 1), save(b, "same", 1)]);
  assert.deepEqual(clash.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
  const refused = clash.find((r) => r.status === "rejected") as PromiseRejectedResult;
  assert.ok(refused.reason instanceof SkillWriteError);
  assert.equal(refused.reason.pythonType, "FileExistsError");
  assert.equal(readdirSync(shared).filter((n) => n.startsWith(".")).length, 0);
});
