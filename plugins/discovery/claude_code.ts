/**
 * Claude Code: `~/.claude.json` (or `$CLAUDE_CONFIG_DIR/.claude.json`) holds user-scope servers in its
 * top-level `mcpServers` and local-scope servers in `projects["<abs path>"].mcpServers`; `<project>/.mcp.json`
 * holds project-scope servers. Claude Code ranks them local > project > user.
 * @module
 */

import type { DiscoveryContext, DiscoveryPlugin, DiscoveryResult } from "../../core/contracts/discovery.ts";
import {
  fileProblem,
  isRecord,
  jsonServerMap,
  loadJson,
  locate,
  type Location,
  pathFor,
  plainFlavour,
  readJsonServers,
} from "./_private.ts";

/** A Claude Code scope. */
export type ClaudeCodeScope = "user" | "project" | "local";

/** Options for the Claude Code plugin. */
export interface ClaudeCodeOptions {
  /** Which of Claude Code's scopes to read. */
  scopes?: readonly ClaudeCodeScope[];
}

/** Reads every scope. */
export const defaults = { scopes: ["user", "project", "local"] } satisfies ClaudeCodeOptions;

/** Claude Code's two files: `.claude.json` (user and local scopes) and the project's `.mcp.json`. */
export function claudeCodeLocations(context: DiscoveryContext): Location[] {
  const path = pathFor(context.platform);
  const dir = context.env.CLAUDE_CONFIG_DIR || context.home;
  return [
    { pattern: path.join(dir, ".claude.json"), scope: "user" },
    { pattern: path.join(context.cwd, ".mcp.json"), scope: "project" },
  ];
}

function samePath(a: string, b: string, platform: string): boolean {
  const norm = (p: string) => {
    const slashed = p.replace(/[\\/]+$/, "");
    return platform === "win32" ? slashed.replace(/\\/g, "/").toLowerCase() : slashed;
  };
  return norm(a) === norm(b);
}

async function readClaudeJson(
  file: string,
  context: DiscoveryContext,
  scopes: readonly ClaudeCodeScope[],
): Promise<DiscoveryResult> {
  const { root, diagnostics } = await loadJson(file);
  const result: DiscoveryResult = { servers: [], diagnostics };
  if (root === undefined) return result;
  if (!isRecord(root)) {
    diagnostics.push(
      fileProblem(file, `Cannot use "${file}": expected a JSON object at the top; fix the file`),
    );
    return result;
  }
  const add = (part: DiscoveryResult) => {
    result.servers.push(...part.servers);
    result.diagnostics.push(...part.diagnostics);
  };
  if (scopes.includes("user")) {
    add(
      jsonServerMap(
        root.mcpServers,
        { plugin: "claude_code", file, scope: "user", prefix: "mcpServers" },
        plainFlavour,
      ),
    );
  }
  if (!scopes.includes("local") || root.projects === undefined) return result;
  if (!isRecord(root.projects)) {
    diagnostics.push(
      fileProblem(file, `Cannot use "projects" in "${file}": expected an object; fix the file`),
    );
    return result;
  }
  const key = Object.keys(root.projects).find((dir) => samePath(dir, context.cwd, context.platform));
  if (key === undefined) return result;
  const project = root.projects[key];
  const prefix = `projects[${JSON.stringify(key)}]`;
  if (!isRecord(project)) {
    diagnostics.push(
      fileProblem(file, `Cannot use ${prefix} in "${file}": expected an object; fix the file`),
    );
    return result;
  }
  const where = { plugin: "claude_code", file, scope: "local", prefix: `${prefix}.mcpServers` };
  add(jsonServerMap(project.mcpServers, where, plainFlavour));
  return result;
}

/** Discovers the servers configured in Claude Code, each tagged with its scope. */
export function claudeCode(options: ClaudeCodeOptions = {}): DiscoveryPlugin {
  const { scopes } = { ...defaults, ...options };
  const locations = (context: DiscoveryContext) =>
    claudeCodeLocations(context).filter((location) =>
      location.scope === "project" ? scopes.includes("project") : scopes.some((s) => s !== "project")
    );
  return {
    name: "claude_code",
    candidates: (context) => locate(locations(context), context.platform),
    read: (file, context) =>
      // The two formats differ by file name, wherever CLAUDE_CONFIG_DIR puts `.claude.json`.
      pathFor(context.platform).basename(file) === ".mcp.json"
        ? readJsonServers({ plugin: "claude_code", file, scope: "project" }, "mcpServers", plainFlavour)
        : readClaudeJson(file, context, scopes),
  };
}
