/**
 * Deterministic synthetic skills for the skills benchmark: each a small workflow over two tools of the
 * synthetic catalog (its description built from theirs), with code that calls server-everything's real
 * tools (so `skills check` has calls to check, one in ten of them drifted). Run
 * `deno run -A scripts/synthetic_skills.ts [count] [dir]` to write them into `dir`.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { syntheticCatalog } from "./synthetic_catalog.ts";

/** One synthetic skill. */
export interface SyntheticSkill {
  name: string;
  description: string;
  code: string;
}

/** `count` skills, the same ones for the same count. */
export function syntheticSkills(count = 100): SyntheticSkill[] {
  const tools = syntheticCatalog(count * 2).flatMap(({ tools }) => tools);
  return Array.from({ length: count }, (_, i) => {
    const [first, second] = [tools[(2 * i) % tools.length], tools[(2 * i + 1) % tools.length]];
    const words = (text: string | undefined) => (text ?? "").replace(/\.$/, "").toLowerCase();
    const name = `workflow-${i}-${first.name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "")}`
      .slice(0, 64).replace(/-$/, "");
    const drifted = i % 10 === 9;
    return {
      name,
      description: `${words(first.description)}, then ${words(second.description)}`.slice(0, 1000),
      code: [
        `"""Workflow ${i}."""`,
        "",
        `async def run(message: str = "${first.name}") -> list:`,
        `    """${first.description ?? ""}"""`,
        "    first = await mcp_everything.echo(message=message)",
        `    total = await mcp_everything.get_sum(a=${i}, b=1)`,
        drifted ? "    gone = await mcp_everything.retired_tool(message=message)" : "    gone = None",
        "    return [first, total, gone]",
        "",
        "def describe() -> str:",
        `    return ${JSON.stringify(second.name)}`,
        "",
      ].join("\n"),
    };
  });
}

/** Writes skills as folders (SKILL.md and skill.py) into `dir`. */
export function writeSkills(dir: string, skills: SyntheticSkill[]): void {
  for (const skill of skills) {
    const folder = join(dir, skill.name);
    mkdirSync(folder, { recursive: true });
    writeFileSync(
      join(folder, "SKILL.md"),
      `---\nname: ${skill.name}\ndescription: ${JSON.stringify(skill.description)}\n---\n` +
        `# ${skill.name}\n\n${skill.description}\n\n\`from skills import ${
          skill.name.replaceAll("-", "_")
        }\`\n`,
    );
    writeFileSync(join(folder, "skill.py"), skill.code);
  }
}

if (import.meta.main) {
  const count = Number(process.argv[2] ?? 100);
  const dir = process.argv[3];
  if (dir) writeSkills(dir, syntheticSkills(count));
  else console.log(JSON.stringify(syntheticSkills(count), null, 2));
}
