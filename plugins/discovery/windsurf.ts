/**
 * Windsurf: `~/.codeium/windsurf/mcp_config.json`, servers under `mcpServers`, remotes as `serverUrl` or `url`.
 * @module
 */

import type { DiscoveryContext, DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { type Flavour, jsonPlugin, type Location, pathFor } from "./_private.ts";

/** Options for the Windsurf plugin. */
export interface WindsurfOptions {
  /** Folder under `~/.codeium` holding the config; Windsurf Next uses "windsurf-next". */
  app?: string;
}

/** Reads the stable Windsurf release's config. */
export const defaults = { app: "windsurf" } satisfies WindsurfOptions;

const flavour: Flavour = { urlKeys: [{ key: "serverUrl" }, { key: "url" }] };

/** Where Windsurf keeps its server list. */
export function windsurfLocations(context: DiscoveryContext, app: string = defaults.app): Location[] {
  const path = pathFor(context.platform);
  return [{ pattern: path.join(context.home, ".codeium", app, "mcp_config.json"), scope: "user" }];
}

/** Discovers the servers configured in Windsurf. */
export function windsurf(options: WindsurfOptions = {}): DiscoveryPlugin {
  const { app } = { ...defaults, ...options };
  return jsonPlugin("windsurf", (context) => windsurfLocations(context, app), "mcpServers", flavour);
}
