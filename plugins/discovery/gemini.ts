/**
 * Gemini CLI: `~/.gemini/settings.json` (user) and `<project>/.gemini/settings.json` (project), servers under
 * `mcpServers`. `httpUrl` is streamable HTTP, `url` is SSE, `timeout` is in milliseconds, and `$VAR` expands
 * like `${VAR}`.
 * @module
 */

import type { DiscoveryContext, DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { braceBareVars } from "../../core/config/expand_vars.ts";
import { type Flavour, inScopes, jsonPlugin, type Location, pathFor } from "./_private.ts";

/** Options for the Gemini CLI plugin. */
export interface GeminiOptions {
  /** Which of Gemini CLI's scopes to read. */
  scopes?: readonly ("user" | "project")[];
}

/** Reads both the user and the project settings. */
export const defaults = { scopes: ["user", "project"] } satisfies GeminiOptions;

const flavour: Flavour = {
  urlKeys: [{ key: "httpUrl", transport: "http" }, { key: "url", transport: "sse" }],
  rewrite: braceBareVars,
};

/** Where Gemini CLI keeps its settings, lowest precedence first. */
export function geminiLocations(context: DiscoveryContext): Location[] {
  const path = pathFor(context.platform);
  return [
    { pattern: path.join(context.home, ".gemini", "settings.json"), scope: "user" },
    { pattern: path.join(context.cwd, ".gemini", "settings.json"), scope: "project" },
  ];
}

/** Discovers the servers configured in Gemini CLI. */
export function gemini(options: GeminiOptions = {}): DiscoveryPlugin {
  const { scopes } = { ...defaults, ...options };
  return jsonPlugin("gemini", (context) => inScopes(geminiLocations(context), scopes), "mcpServers", flavour);
}
