/**
 * MCPs dir (the Python bridge's layout): one or more JSON files per folder, each with `mcpServers`, in
 * `~/MCPs`, `~/.config/mcp/servers` and `<cwd>/mcp-servers`.
 * @module
 */

import type { DiscoveryContext, DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { inScopes, jsonPlugin, type Location, pathFor, plainFlavour } from "./_private.ts";

/** Options for the MCPs dir plugin. */
export interface McpsDirOptions {
  /** Which folders to read: "user" is the two under home, "project" is `<cwd>/mcp-servers`. */
  scopes?: readonly ("user" | "project")[];
}

/** Reads every folder. */
export const defaults = { scopes: ["user", "project"] } satisfies McpsDirOptions;

/** The folders' file patterns, lowest precedence first (files within a folder in name order). */
export function mcpsDirLocations(context: DiscoveryContext): Location[] {
  const path = pathFor(context.platform);
  return [
    { pattern: path.join(context.home, "MCPs", "*.json"), scope: "user" },
    { pattern: path.join(context.home, ".config", "mcp", "servers", "*.json"), scope: "user" },
    { pattern: path.join(context.cwd, "mcp-servers", "*.json"), scope: "project" },
  ];
}

/** Discovers the servers defined in MCPs dir files. */
export function mcpsDir(options: McpsDirOptions = {}): DiscoveryPlugin {
  const { scopes } = { ...defaults, ...options };
  return jsonPlugin(
    "mcps_dir",
    (context) => inScopes(mcpsDirLocations(context), scopes),
    "mcpServers",
    plainFlavour,
  );
}
