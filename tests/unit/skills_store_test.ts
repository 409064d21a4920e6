/**
 * The skill store over real directories: precedence of the project, user and config directories, bad
 * skills as diagnostics (broken frontmatter, a name that is not its folder's, symlinks, over SKILL_LIMITS,
 * unreadable files) while the others load, safe reads, and search docs.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SkillStore } from "../../core/skills/store.ts";
import { type SkillRoot, skillRoots, userSkillsDir } from "../../core/skills/sources.ts";
import { cachedSkillDocs } from "../../core/skills/docs_cache.ts";
import { type LayeredSkillFiles, layeredSkillFiles } from "../../core/skills/layered_files.ts";

/** A temp project, HOME and config dir, each with an empty skills directory. */
function dirs() {
  const root = mkdtempSync(join(tmpdir(), "codemode-skills-"));
  const cwd = join(root, "project");
  const home = join(root, "home");
  const extra = join(root, "claude-skills");
  const project = join(cwd, ".codemode", "skills");
  const user = join(home, ".config", "codemode", "skills");
  for (const dir of [project, user, extra]) mkdirSync(dir, { recursive: true });
  const roots = skillRoots({ cwd, env: { HOME: home }, dirs: [extra] });
  return { root, cwd, home, project, user, extra, roots };
}

/** Writes a skill folder `dir/name` with a SKILL.md (and code when given). */
function skill(
  dir: string,
  name: string,
  description = `The ${name} skill`,
  code?: string,
  frontName = name,
) {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(
    join(dir, name, "SKILL.md"),
    `---\nname: ${frontName}\ndescription: ${description}\n---\nBody of ${name}\n`,
  );
  if (code !== undefined) writeFileSync(join(dir, name, "skill.py"), code);
}

Deno.test("skillRoots() puts the project first, then the user's directory, then the config file's", () => {
  const roots = skillRoots({ cwd: "/p", env: { HOME: "/h" }, dirs: ["/x", "rel"] });
  assert.deepEqual(roots, [
    { path: "/p/.codemode/skills", kind: "project" },
    { path: "/h/.config/codemode/skills", kind: "user" },
    { path: "/x", kind: "config" },
    { path: "/p/rel", kind: "config" },
  ]);
  assert.equal(userSkillsDir({ HOME: "/h", XDG_CONFIG_HOME: "/c" }), "/c/codemode/skills");
});

Deno.test("skills load from every directory; a name in an earlier directory shadows a later one", async () => {
  const d = dirs();
  skill(d.project, "shared", "project version");
  skill(d.user, "shared", "user version");
  skill(d.user, "todo-counter", "Counts TODOs", "def count():\n    return 1\n");
  skill(d.extra, "field-guide", "Only docs");
  const store = await SkillStore.open({ roots: d.roots, mode: "rw" });
  const names = store.skills().map((s) => [s.name, s.root.kind, s.hasCode]);
  assert.deepEqual(names.sort(), [
    ["field-guide", "config", false],
    ["shared", "project", false],
    ["todo-counter", "user", true],
  ]);
  assert.equal(store.find("shared")!.description, "project version");
  assert.equal(store.find("todo_counter")!.module, "todo_counter", "underscores name the same skill");
  const shadow = store.diagnostics().find((x) => x.path === join(d.user, "shared"));
  assert.match(shadow!.message, /shadowed by .*project.*shared/);
  assert.equal(await store.readText("todo-counter", "skill.py"), "def count():\n    return 1\n");
});

Deno.test("bad skills become diagnostics and never stop the others loading", async () => {
  const d = dirs();
  skill(d.user, "good", "Works");
  mkdirSync(join(d.user, "broken"));
  writeFileSync(join(d.user, "broken", "SKILL.md"), "no frontmatter here\n");
  skill(d.user, "misnamed", "Wrong name", undefined, "other-name");
  skill(d.user, "Upper", "Uppercase folder", undefined, "Upper");
  // A symlinked skill folder and a skill with a symlinked file: never followed.
  const outside = join(d.root, "outside");
  skill(outside, "linked", "Lives elsewhere");
  symlinkSync(join(outside, "linked"), join(d.user, "linked"));
  writeFileSync(join(d.root, "secret.txt"), "host secret");
  skill(d.user, "leaky", "Links a host file", "def f(): pass\n");
  rmSync(join(d.user, "leaky", "skill.py"));
  symlinkSync(join(d.root, "secret.txt"), join(d.user, "leaky", "skill.py"));
  // Over the SDK's SKILL_LIMITS (512 files per skill).
  skill(d.extra, "many-files", "Too many files");
  for (let i = 0; i < 513; i++) writeFileSync(join(d.extra, "many-files", `f${i}.txt`), "x");
  const store = await SkillStore.open({ roots: d.roots, mode: "rw" });
  assert.deepEqual(store.skills().map((s) => s.name), ["good"]);
  const problems = Object.fromEntries(
    store.diagnostics().map((x) => [x.path.slice(d.root.length), x.message]),
  );
  assert.match(problems["/home/.config/codemode/skills/broken/SKILL.md"], /must begin with a "---" line/);
  assert.match(
    problems["/home/.config/codemode/skills/misnamed/SKILL.md"],
    /must match the last path segment/,
  );
  assert.match(problems["/home/.config/codemode/skills/Upper/SKILL.md"], /lowercase letters/);
  assert.match(problems["/home/.config/codemode/skills/linked"], /symlinks .* not followed/);
  assert.match(problems["/home/.config/codemode/skills/leaky/skill.py"], /symlinks .* not followed/);
  assert.match(problems["/claude-skills/many-files"], /exceeds the limit of 512 files/);
  assert.ok(Object.values(problems).every((m) => !/Raise limits/.test(m)));
  assert.ok(!JSON.stringify(store.docs()).includes("host secret"));
});

Deno.test("a skill with an unreadable file is skipped and the rest load", async () => {
  const d = dirs();
  skill(d.user, "good", "Works");
  skill(d.user, "locked", "Unreadable", "def f(): pass\n");
  // Root reads a mode-0 file anyway, so the failure is injected where the store reads.
  const files = (roots: SkillRoot[]): LayeredSkillFiles => {
    const real = layeredSkillFiles(roots);
    return {
      ...real,
      read: (path) =>
        path === "locked/skill.py"
          ? Promise.reject(Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" }))
          : real.read(path),
    };
  };
  const store = await SkillStore.open({ roots: d.roots, mode: "rw", files });
  assert.deepEqual(store.skills().map((s) => s.name), ["good"]);
  assert.match(store.diagnostics()[0].message, /cannot be read/);
});

Deno.test("a missing skill directory holds no skills and reports nothing", async () => {
  const d = dirs();
  rmSync(d.extra, { recursive: true });
  rmSync(d.project, { recursive: true });
  skill(d.user, "only", "The only one");
  const store = await SkillStore.open({ roots: d.roots, mode: "ro" });
  assert.deepEqual(store.skills().map((s) => s.name), ["only"]);
  assert.deepEqual(store.diagnostics(), []);
});

Deno.test("readText() reads only listed files and refuses a skill folder swapped for a symlink", async () => {
  const d = dirs();
  skill(d.user, "swapped", "Will be swapped", "def f(): pass\n");
  const store = await SkillStore.open({ roots: d.roots, mode: "rw", refreshMs: 60_000 });
  await assert.rejects(store.readText("swapped", "../../secret.txt"), /has no file/);
  await assert.rejects(store.readText("nope", "skill.py"), /No skill named "nope"/);
  writeFileSync(join(d.root, "secret.py"), "def f(): pass\n"); // same size as the listed file
  const outside = join(d.root, "elsewhere");
  mkdirSync(outside);
  writeFileSync(join(outside, "skill.py"), "SECRET = 1234\n");
  writeFileSync(join(outside, "SKILL.md"), "---\nname: swapped\ndescription: x\n---\n");
  rmSync(join(d.user, "swapped"), { recursive: true });
  symlinkSync(outside, join(d.user, "swapped"));
  await assert.rejects(store.readText("swapped", "skill.py"), /No skill named "swapped"/);
});

Deno.test("readText() sees a file edited since the load, and later loads pick up new skills", async () => {
  const d = dirs();
  skill(d.user, "edited", "Edited later", "def f(): pass\n");
  const store = await SkillStore.open({ roots: d.roots, mode: "rw", refreshMs: 0 });
  let changes = 0;
  store.onChange(() => changes++);
  writeFileSync(join(d.user, "edited", "skill.py"), "def f():\n    return 'longer now'\n");
  assert.equal(await store.readText("edited", "skill.py"), "def f():\n    return 'longer now'\n");
  skill(d.extra, "added", "Added later");
  await store.fresh();
  assert.ok(store.find("added"));
  assert.ok(changes >= 1);
});

Deno.test("docs() gives each skill as a search doc of server skills with its SKILL.md to search", async () => {
  const d = dirs();
  skill(d.user, "tide-tables", "Predict high water", "def predict(port): pass\n");
  const store = await SkillStore.open({ roots: d.roots, mode: "rw" });
  const [doc] = store.docs();
  assert.equal(doc.server, "skills");
  assert.equal(doc.tool, "tide-tables");
  assert.equal(doc.kind, "skill");
  assert.match(doc.body!, /Body of tide-tables/);
});

Deno.test("cachedSkillDocs() answers from the state dir while the skill directories are unchanged", async () => {
  const d = dirs();
  const state = join(d.root, "state");
  skill(d.user, "tide-tables", "Predict high water");
  const first = await cachedSkillDocs(d.roots, state);
  assert.deepEqual(first.map((x) => x.tool), ["tide-tables"]);
  // Rewrite the cache with a marker: an unchanged directory is answered from it.
  const file = join(state, "skill-docs.json");
  const cached = JSON.parse(readFileSync(file, "utf8"));
  writeFileSync(
    file,
    JSON.stringify({ ...cached, docs: [{ ...cached.docs[0], description: "from the cache" }] }),
  );
  assert.equal((await cachedSkillDocs(d.roots, state))[0].description, "from the cache");
  skill(d.extra, "field-guide", "Names birds");
  const after = await cachedSkillDocs(d.roots, state);
  assert.deepEqual(after.map((x) => [x.tool, x.description]).sort(), [
    ["field-guide", "Names birds"],
    ["tide-tables", "Predict high water"],
  ]);
});
