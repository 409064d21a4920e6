/**
 * codemode serves its skills to its own MCP clients through the MCP skills extension: skills/list,
 * skills/get and the files as resources, read and verified with the client SDK's SkillsClient; and the
 * capabilities text lists them, capped.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { SkillsClient } from "@modelcontextprotocol/client/ext/skills";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { createMcpServer } from "../../core/serve/mcp_server.ts";
import { capabilityText } from "../../core/serve/capabilities.ts";
import { compact } from "../../plugins/output/compact.ts";
import { SkillStore } from "../../core/skills/store.ts";
import { skillRoots } from "../../core/skills/sources.ts";
import { saveSkill } from "../../core/skills/save.ts";

async function served() {
  const root = mkdtempSync(join(tmpdir(), "codemode-skills-serve-"));
  const roots = skillRoots({ cwd: join(root, "p"), env: { HOME: join(root, "h") } });
  mkdirSync(join(roots[1].path, "field-guide"), { recursive: true });
  writeFileSync(
    join(roots[1].path, "field-guide", "SKILL.md"),
    "---\nname: field-guide\ndescription: Birds\n---\nLook up.\n",
  );
  const store = await SkillStore.open({ roots, mode: "rw" });
  const connect = async () => {
    const server = createMcpServer({
      runner: { run: () => Promise.reject(new Error("no runs here")) },
      output: compact(),
      defaultTimeout: 30,
      maxTimeout: 120,
      capabilities: () => "# caps\n",
      preload: () => Promise.resolve([]),
      sessionKey: "k",
      version: "1",
      skills: store.catalog,
    });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const client = new Client({ name: "test", version: "1" });
    await client.connect(b);
    return { client, close: () => Promise.all([client.close(), server.close()]) };
  };
  return { store, connect };
}

Deno.test("an MCP client lists, gets and reads codemode's skills through the skills extension", async () => {
  const { store, connect } = await served();
  const { client, close } = await connect();
  try {
    const skills = new SkillsClient(client);
    assert.equal(skills.supported, true);
    const listing = await skills.list();
    assert.deepEqual(listing.skills.map((s) => s.uri), ["skill://field-guide/SKILL.md"]);
    const manifest = await skills.read(listing.skills[0]);
    assert.equal(manifest.body, "Look up.\n");
    await saveSkill(store, { name: "tide-tables", code: "def predict(port): pass\n", description: "Tides" });
    const { skill } = await skills.get("skill://tide-tables/SKILL.md");
    const code = await skills.read(skill, "skill.py");
    assert.equal(code.text, "def predict(port): pass\n");
    assert.equal(code.verified, true);
  } finally {
    await close();
  }
});

Deno.test("a second client connection is served by the same catalog", async () => {
  const { connect } = await served();
  const first = await connect();
  const second = await connect();
  try {
    assert.equal((await new SkillsClient(second.client).list()).skills.length, 1);
  } finally {
    await first.close();
    await second.close();
  }
});

Deno.test("the capabilities text says how to use skills and lists them, capped at 20", () => {
  const list = Array.from({ length: 25 }, (_, i) => ({ name: `skill-${i}`, description: `Does thing ${i}` }));
  const text = capabilityText([], undefined, undefined, { writable: true, list });
  assert.match(text, /## Skills \(25\)/);
  assert.match(text, /from skills import <name>/);
  assert.match(text, /runtime\.save_skill\(name, code_or_function, description\)/);
  assert.match(text, /- `skill_0`: Does thing 0/);
  assert.ok(!text.includes("skill_20"));
  assert.match(text, /\.\.\. 5 more/);
  const readOnly = capabilityText([], undefined, undefined, { writable: false, list: [] });
  assert.ok(!readOnly.includes("save_skill"));
  assert.ok(!capabilityText([]).includes("## Skills"), "skills off: no section");
});
