/**
 * An MCP server (v2 server SDK, stdio) that publishes skills through the MCP skills extension
 * (`io.modelcontextprotocol/skills`), for codemode's tests of upstream skills: a documentation skill
 * `release-checklist`, a skill with code `tide-tables`, and one tool, `tide`.
 *
 * Run: `deno run -A tests/testdata/servers/skills_server.ts`
 * @module
 */
import { McpServer } from "@modelcontextprotocol/server";
import { memorySkillFiles, SkillsExtension } from "@modelcontextprotocol/server/ext/skills";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import * as z from "zod";

/** The published skills' files, by path. */
export const SKILL_FILES: Record<string, string> = {
  "release-checklist/SKILL.md": [
    "---",
    "name: release-checklist",
    "description: Steps to cut a harbour software release with sign-off from the lighthouse keeper",
    "---",
    "# Release checklist",
    "",
    "1. Freeze the branch. 2. Ask the lighthouse keeper. 3. Tag it.",
    "",
  ].join("\n"),
  "tide-tables/SKILL.md": [
    "---",
    "name: tide-tables",
    "description: Predict high and low water from the harbour tide tool",
    "---",
    "Call `predict(port)`.",
    "",
  ].join("\n"),
  "tide-tables/skill.py": [
    "async def predict(port: str) -> str:",
    '    """High water for a port."""',
    "    return await mcp_publisher.tide(port=port)",
    "",
  ].join("\n"),
};

if (import.meta.main) {
  const skills = await SkillsExtension.load(memorySkillFiles(SKILL_FILES), { onWarning: () => {} });
  const server = new McpServer({ name: "skills-publisher", version: "1.0.0" });
  server.registerTool(
    "tide",
    { description: "High water time for a port", inputSchema: z.object({ port: z.string() }) },
    ({ port }) => ({ content: [{ type: "text", text: `High water at ${port}: 06:12` }] }),
  );
  skills.attach(server);
  await server.connect(new StdioServerTransport());
}
