/**
 * Skills through a real `codemode serve` beyond the per-runtime suite: skills an upstream server
 * publishes through the MCP skills extension (a test server built on the SDK) join search and are read
 * with `read_skill("<server>/<name>")`; CODEMODE_SKILLS=ro loads but refuses saves; off turns them off.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SkillsClient } from "@modelcontextprotocol/client/ext/skills";
import { podman } from "../../plugins/runtime/podman.ts";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { fakeHome, ROOT, serve } from "./_serve.ts";
import { cli } from "./_skills_suite.ts";

const runtime = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE)
  ? "podman"
  : (await pyodide().detect()).available
  ? "pyodide"
  : undefined;
if (!runtime) console.warn("IGNORED skills serve tests: neither podman (with the image) nor pyodide works");
const env = { CODEMODE_RUNTIME: runtime ?? "auto", CODEMODE_TIMEOUT: "90" };
const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !runtime, sanitizeOps: false, sanitizeResources: false, fn });

const publisher = {
  publisher: {
    command: join(ROOT, "node_modules/.bin/deno"),
    args: ["run", "-A", "--quiet", join(ROOT, "tests/testdata/servers/skills_server.ts")],
  },
};

/** A HOME with one saved skill, `tide-clock`, in the user's skills directory. */
function homeWithSkill(extra: Record<string, unknown> = {}): string {
  const home = fakeHome(extra);
  const dir = join(home, ".config", "codemode", "skills", "tide-clock");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "SKILL.md"), "---\nname: tide-clock\ndescription: Tells the tide\n---\n");
  writeFileSync(join(dir, "skill.py"), "def now():\n    return 'high water'\n");
  return home;
}

test("skills an upstream server publishes are searched, listed and read as <server>/<name>", async () => {
  const home = homeWithSkill(publisher);
  const s = await serve(env, home);
  try {
    // The catalog indexes servers in the background; their skills join search when it has.
    let hits: string[] = [];
    for (let i = 0; i < 60 && !hits.includes("publisher/release-checklist"); i++) {
      const r = await s.run(
        "from mcp import runtime\n[h['tool'] for h in await runtime.search_tool_docs('lighthouse keeper release', limit=3)]",
        90,
      );
      hits = JSON.parse(String(r.structured.value ?? "[]").replaceAll("'", '"'));
      if (!hits.includes("publisher/release-checklist")) await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(hits[0], "publisher/release-checklist");
    const r = await s.run(
      `from mcp import runtime
doc = await runtime.read_skill("publisher/release-checklist")
code = await runtime.read_skill("publisher/tide-tables")
names = [s["name"] for s in await runtime.list_skills()]
try:
    await runtime.read_skill("publisher/../../etc/passwd")
    escaped = "read"
except KeyError:
    escaped = "KeyError"
(doc["skill_md"].splitlines()[1], code["code"].splitlines()[0], sorted(names), escaped)`,
      90,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(
      r.structured.value,
      "('name: release-checklist', 'async def predict(port: str) -> str:', " +
        "['publisher/release-checklist', 'publisher/tide-tables', 'tide-clock'], 'KeyError')",
    );
  } finally {
    await s.close();
  }
  const search = await cli(home, ["search", "lighthouse", "keeper", "--json"]);
  assert.equal(search.code, 0, search.stderr);
  assert.equal(JSON.parse(search.stdout)[0].tool, "publisher/release-checklist");
});

test("CODEMODE_SKILLS=ro loads and imports skills but refuses to save one", async () => {
  const home = homeWithSkill();
  const s = await serve({ ...env, CODEMODE_SKILLS: "ro" }, home);
  try {
    const r = await s.run(
      `from skills import tide_clock
from mcp import runtime
try:
    await runtime.save_skill("new-one", "def f(): pass", "Never written")
    saved = "saved"
except PermissionError as error:
    saved = str(error)
(tide_clock.now(), saved)`,
      90,
    );
    assert.equal(
      r.structured.value,
      "('high water', 'Saving skills is turned off here (CODEMODE_SKILLS=ro)')",
    );
  } finally {
    await s.close();
  }
});

test("CODEMODE_SKILLS=off: no import, no search hit, no skills extension for MCP clients", async () => {
  const home = homeWithSkill();
  const s = await serve({ ...env, CODEMODE_SKILLS: "off" }, home);
  try {
    const r = await s.run(
      `from mcp import runtime
try:
    import skills.tide_clock
    imported = "imported"
except PermissionError as error:
    imported = str(error)
hits = [h for h in await runtime.search_tool_docs("tide", limit=10) if h.get("kind") == "skill"]
(imported, hits, "Skills are" in runtime.capability_summary())`,
      90,
    );
    assert.equal(r.structured.value, "('Skills are turned off here (CODEMODE_SKILLS=off)', [], False)");
    assert.equal(new SkillsClient(s.client).supported, false);
  } finally {
    await s.close();
  }
});
