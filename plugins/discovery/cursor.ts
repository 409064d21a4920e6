/**
 * Cursor: `~/.cursor/mcp.json` (user) and `<project>/.cursor/mcp.json` (project), servers under `mcpServers`.
 * @module
 */

import type { DiscoveryContext, DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { inScopes, jsonPlugin, type Location, pathFor, plainFlavour } from "./_private.ts";

/** Options for the Cursor plugin. */
export interface CursorOptions {
  /** Which of Cursor's scopes to read. */
  scopes?: readonly ("user" | "project")[];
}

/** Reads both the user and the project file. */
export const defaults = { scopes: ["user", "project"] } satisfies CursorOptions;

/** Where Cursor keeps its server lists, lowest precedence first. */
export function cursorLocations(context: DiscoveryContext): Location[] {
  const path = pathFor(context.platform);
  return [
    { pattern: path.join(context.home, ".cursor", "mcp.json"), scope: "user" },
    { pattern: path.join(context.cwd, ".cursor", "mcp.json"), scope: "project" },
  ];
}

/** Discovers the servers configured in Cursor. */
export function cursor(options: CursorOptions = {}): DiscoveryPlugin {
  const { scopes } = { ...defaults, ...options };
  return jsonPlugin(
    "cursor",
    (context) => inScopes(cursorLocations(context), scopes),
    "mcpServers",
    plainFlavour,
  );
}
