/**
 * `codemode skills list|show|rm|check` from source, in a throwaway HOME and project: JSON for scripts,
 * tables otherwise, `--help` everywhere, exit codes, and the config file's `skills.dirs`. (`check`
 * against real servers runs in the per-runtime suites; doctor's skills section in doctor_test.ts.)
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fakeHome } from "./_serve.ts";
import { cli } from "./_skills_suite.ts";

function skill(dir: string, name: string, description: string, code?: string): void {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(
    join(dir, name, "SKILL.md"),
    `---\nname: ${name}\ndescription: ${description}\n---\nHow to use ${name}.\n`,
  );
  if (code) writeFileSync(join(dir, name, "skill.py"), code);
}

/** A HOME whose project, user and config-file skill directories each hold skills, plus a broken one. */
function setup(): { home: string; user: string; project: string; extra: string } {
  const home = fakeHome();
  const user = join(home, ".config", "codemode", "skills");
  const project = join(home, ".codemode", "skills");
  const extra = join(home, "team-skills");
  skill(user, "tide-clock", "Tells the tide", "def now():\n    return 'high'\n");
  skill(project, "release-notes", "Drafts release notes");
  skill(extra, "field-guide", "Names birds");
  skill(extra, "tide-clock", "A shadowed copy");
  mkdirSync(join(user, "broken"));
  writeFileSync(join(user, "broken", "SKILL.md"), "no frontmatter\n");
  symlinkSync(join(extra, "field-guide"), join(user, "linked-guide"));
  writeFileSync(join(home, "codemode.yaml"), "skills:\n  dirs: [team-skills]\n");
  return { home, user, project, extra };
}

Deno.test("skills list --json lists every directory's skills in precedence order, with diagnostics", async () => {
  const { home, user, extra } = setup();
  const r = await cli(home, ["skills", "list", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const { skills, diagnostics } = JSON.parse(r.stdout);
  assert.deepEqual(
    skills.map((s: { name: string; directory: string; kind: string }) => [s.name, s.directory, s.kind])
      .sort(),
    [["field-guide", "config", "docs"], ["release-notes", "project", "docs"], ["tide-clock", "user", "code"]],
  );
  const paths = diagnostics.map((d: { path: string }) => d.path);
  assert.ok(paths.includes(join(user, "broken", "SKILL.md")), r.stdout);
  assert.ok(paths.includes(join(user, "linked-guide")), r.stdout);
  assert.ok(paths.includes(join(extra, "tide-clock")), "the shadowed copy is reported");
});

Deno.test("skills list prints a table, and the diagnostics go to stderr", async () => {
  const { home } = setup();
  const r = await cli(home, ["skills", "list"]);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /│ tide-clock +│ skills\.tide_clock +│ code +│ Tells the tide +│ user/);
  assert.match(r.stderr, /broken\/SKILL\.md: SKILL\.md frontmatter: line 1/);
  assert.ok(!r.stdout.includes("\x1b["), "NO_COLOR is honoured");
});

Deno.test("skills show prints SKILL.md and the code; an unknown name exits 1 saying which exist", async () => {
  const { home } = setup();
  const r = await cli(home, ["skills", "show", "tide_clock"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /name: tide-clock[\s\S]*def now\(\):/);
  const json = JSON.parse((await cli(home, ["skills", "show", "tide-clock", "--json"])).stdout);
  assert.equal(json.code, "def now():\n    return 'high'\n");
  const missing = await cli(home, ["skills", "show", "nope"]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no skill named "nope"; there are: .*tide-clock/);
});

Deno.test("skills rm removes the folder; removing it again exits 1", async () => {
  const { home, project } = setup();
  const r = await cli(home, ["skills", "rm", "release-notes", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { removed: "release-notes", path: join(project, "release-notes") });
  assert.equal(existsSync(join(project, "release-notes")), false);
  assert.equal((await cli(home, ["skills", "rm", "release-notes"])).code, 1);
});

Deno.test("skills check with no skill that has code needs no sandbox and finds nothing", async () => {
  const home = fakeHome();
  skill(join(home, ".config", "codemode", "skills"), "only-docs", "Words only");
  const r = await cli(home, ["skills", "check", "--json"], { CODEMODE_RUNTIME: "nerdctl" });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { skills: 0, findings: [], unchecked: [], diagnostics: [] });
});

Deno.test("every skills subcommand has --help, and CODEMODE_SKILLS=off makes them exit 1 saying so", async () => {
  const home = fakeHome();
  for (
    const args of [["skills"], ["skills", "list"], ["skills", "show"], ["skills", "rm"], ["skills", "check"]]
  ) {
    const r = await cli(home, [...args, "--help"]);
    assert.equal(r.code, 0, args.join(" "));
    assert.match(r.stdout, /Usage: codemode skills/);
  }
  const off = await cli(home, ["skills", "list"], { CODEMODE_SKILLS: "off" });
  assert.equal(off.code, 1);
  assert.match(off.stderr, /skills are turned off \(CODEMODE_SKILLS=off\)/);
});
