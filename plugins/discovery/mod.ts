/**
 * Discovery plugins: one per MCP client config format, and the default list in precedence order.
 * @module
 */

import type { DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { claudeCode } from "./claude_code.ts";
import { claudeDesktop } from "./claude_desktop.ts";
import { codex } from "./codex.ts";
import { cursor } from "./cursor.ts";
import { gemini } from "./gemini.ts";
import { mcpsDir } from "./mcps_dir.ts";
import { vscode } from "./vscode.ts";
import { windsurf } from "./windsurf.ts";

export { claudeCode, claudeCodeLocations, type ClaudeCodeOptions } from "./claude_code.ts";
export { claudeDesktop, claudeDesktopLocations, type ClaudeDesktopOptions } from "./claude_desktop.ts";
export { codex, codexLocations, type CodexOptions } from "./codex.ts";
export { cursor, cursorLocations, type CursorOptions } from "./cursor.ts";
export { gemini, geminiLocations, type GeminiOptions } from "./gemini.ts";
export { mcpsDir, mcpsDirLocations, type McpsDirOptions } from "./mcps_dir.ts";
export { vscode, vscodeLocations, type VscodeOptions } from "./vscode.ts";
export { windsurf, windsurfLocations, type WindsurfOptions } from "./windsurf.ts";

/**
 * Every discovery plugin, lowest precedence first. Core ranks scopes first (user < project < local) and
 * this order second, so the MCPs dir, listed last, wins ties within a scope.
 */
export function defaultDiscoveryPlugins(): DiscoveryPlugin[] {
  return [claudeDesktop(), claudeCode(), vscode(), cursor(), windsurf(), gemini(), codex(), mcpsDir()];
}
