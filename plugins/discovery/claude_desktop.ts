/**
 * Claude Desktop: one `claude_desktop_config.json` per user, servers under `mcpServers`.
 * @module
 */

import type { DiscoveryContext, DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { appConfigDir, jsonPlugin, type Location, pathFor, plainFlavour } from "./_private.ts";

/** Options for the Claude Desktop plugin. */
export interface ClaudeDesktopOptions {
  /** Read this file instead of the platform's usual location. */
  path?: string;
}

/** Reads the platform's usual location. */
export const defaults: ClaudeDesktopOptions = {};

const FILE = "claude_desktop_config.json";

/** Where Claude Desktop keeps its config on the context's platform (Linux builds are unofficial). */
export function claudeDesktopLocations(context: DiscoveryContext): Location[] {
  const path = pathFor(context.platform);
  const locations = [{ pattern: path.join(appConfigDir(context, "Claude"), FILE), scope: "user" }];
  if (context.platform === "win32") {
    // MSIX (Store) installs see a virtualised %APPDATA% under the package's LocalCache; that copy is
    // the one the app reads, so it comes last and wins.
    const local = context.env.LOCALAPPDATA || path.join(context.home, "AppData", "Local");
    const roaming = path.join(local, "Packages", "Claude_*", "LocalCache", "Roaming", "Claude", FILE);
    locations.push({ pattern: roaming, scope: "user" });
  }
  return locations;
}

/** Discovers the servers configured in Claude Desktop. */
export function claudeDesktop(options: ClaudeDesktopOptions = {}): DiscoveryPlugin {
  const { path } = { ...defaults, ...options };
  const locations = (context: DiscoveryContext) =>
    path ? [{ pattern: path, scope: "user" }] : claudeDesktopLocations(context);
  return jsonPlugin("claude_desktop", locations, "mcpServers", plainFlavour);
}
