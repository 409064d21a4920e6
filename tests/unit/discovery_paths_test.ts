import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  claudeCodeLocations,
  claudeDesktopLocations,
  codexLocations,
  cursorLocations,
  geminiLocations,
  mcpsDirLocations,
  vscodeLocations,
  windsurfLocations,
} from "../../plugins/discovery/mod.ts";
import { locate, scopeOf } from "../../plugins/discovery/_private.ts";

const mac = { home: "/Users/alice", cwd: "/Users/alice/app", platform: "darwin", env: {} };
const linux = { home: "/home/alice", cwd: "/home/alice/app", platform: "linux", env: {} };
const windows = {
  home: "C:\\Users\\alice",
  cwd: "D:\\src\\app",
  platform: "win32",
  env: { APPDATA: "C:\\Users\\alice\\AppData\\Roaming", LOCALAPPDATA: "C:\\Users\\alice\\AppData\\Local" },
};

const patterns = (locations: { pattern: string }[]) => locations.map((l) => l.pattern);

Deno.test("claudeDesktopLocations() gives Application Support on macOS", () => {
  assert.deepEqual(claudeDesktopLocations(mac), [{
    pattern: "/Users/alice/Library/Application Support/Claude/claude_desktop_config.json",
    scope: "user",
  }]);
});

Deno.test("claudeDesktopLocations() gives %APPDATA% and then the MSIX LocalCache path on Windows", () => {
  assert.deepEqual(patterns(claudeDesktopLocations(windows)), [
    "C:\\Users\\alice\\AppData\\Roaming\\Claude\\claude_desktop_config.json",
    "C:\\Users\\alice\\AppData\\Local\\Packages\\Claude_*\\LocalCache\\Roaming\\Claude\\claude_desktop_config.json",
  ]);
  assert.deepEqual(patterns(claudeDesktopLocations({ ...windows, env: {} })), [
    "C:\\Users\\alice\\AppData\\Roaming\\Claude\\claude_desktop_config.json",
    "C:\\Users\\alice\\AppData\\Local\\Packages\\Claude_*\\LocalCache\\Roaming\\Claude\\claude_desktop_config.json",
  ]);
});

Deno.test("claudeDesktopLocations() uses $XDG_CONFIG_HOME on Linux, else ~/.config", () => {
  assert.deepEqual(patterns(claudeDesktopLocations(linux)), [
    "/home/alice/.config/Claude/claude_desktop_config.json",
  ]);
  assert.deepEqual(patterns(claudeDesktopLocations({ ...linux, env: { XDG_CONFIG_HOME: "/xdg" } })), [
    "/xdg/Claude/claude_desktop_config.json",
  ]);
});

Deno.test("vscodeLocations() gives the user mcp.json per platform, then the workspace file", () => {
  assert.deepEqual(vscodeLocations(linux), [
    { pattern: "/home/alice/.config/Code/User/mcp.json", scope: "user" },
    { pattern: "/home/alice/app/.vscode/mcp.json", scope: "workspace" },
  ]);
  assert.deepEqual(patterns(vscodeLocations(mac)), [
    "/Users/alice/Library/Application Support/Code/User/mcp.json",
    "/Users/alice/app/.vscode/mcp.json",
  ]);
  assert.deepEqual(patterns(vscodeLocations(windows, "Code - Insiders")), [
    "C:\\Users\\alice\\AppData\\Roaming\\Code - Insiders\\User\\mcp.json",
    "D:\\src\\app\\.vscode\\mcp.json",
  ]);
});

Deno.test("the home-and-project clients give the same relative paths on every platform", () => {
  assert.deepEqual(claudeCodeLocations(linux), [
    { pattern: "/home/alice/.claude.json", scope: "user" },
    { pattern: "/home/alice/app/.mcp.json", scope: "project" },
  ]);
  assert.deepEqual(patterns(claudeCodeLocations({ ...windows, env: { CLAUDE_CONFIG_DIR: "E:\\claude" } })), [
    "E:\\claude\\.claude.json",
    "D:\\src\\app\\.mcp.json",
  ]);
  assert.deepEqual(patterns(cursorLocations(windows)), [
    "C:\\Users\\alice\\.cursor\\mcp.json",
    "D:\\src\\app\\.cursor\\mcp.json",
  ]);
  assert.deepEqual(patterns(geminiLocations(mac)), [
    "/Users/alice/.gemini/settings.json",
    "/Users/alice/app/.gemini/settings.json",
  ]);
  assert.deepEqual(patterns(windsurfLocations(windows)), [
    "C:\\Users\\alice\\.codeium\\windsurf\\mcp_config.json",
  ]);
  assert.deepEqual(patterns(codexLocations(linux)), ["/home/alice/.codex/config.toml"]);
  assert.deepEqual(patterns(codexLocations({ ...linux, env: { CODEX_HOME: "/opt/codex" } })), [
    "/opt/codex/config.toml",
  ]);
  assert.deepEqual(mcpsDirLocations(linux), [
    { pattern: "/home/alice/MCPs/*.json", scope: "user" },
    { pattern: "/home/alice/.config/mcp/servers/*.json", scope: "user" },
    { pattern: "/home/alice/app/mcp-servers/*.json", scope: "project" },
  ]);
});

Deno.test("scopeOf() matches a found file back to its location, a glob covering one folder level", () => {
  const locations = mcpsDirLocations(linux);
  assert.equal(scopeOf(locations, "/home/alice/MCPs/a.json"), "user");
  assert.equal(scopeOf(locations, "/home/alice/app/mcp-servers/b.json"), "project");
  assert.equal(scopeOf(locations, "/home/alice/MCPs/sub/a.json"), undefined);
  const msix = claudeDesktopLocations(windows)[1].pattern.replace("Claude_*", "Claude_pzs8sxrjxfjjc");
  assert.equal(scopeOf(claudeDesktopLocations(windows), msix), "user");
});

Deno.test("locate() expands a * folder segment (the MSIX package dir) and returns only existing files", async () => {
  const root = await mkdtemp(join(tmpdir(), "codemode-discovery-"));
  try {
    const tail = ["LocalCache", "Roaming", "Claude", "claude_desktop_config.json"];
    for (const pkg of ["Claude_pzs8sxrjxfjjc", "Claude_empty", "Other_1"]) {
      await mkdir(join(root, "Packages", pkg, ...tail.slice(0, -1)), { recursive: true });
    }
    const file = join(root, "Packages", "Claude_pzs8sxrjxfjjc", ...tail);
    await writeFile(file, "{}");
    await writeFile(join(root, "Packages", "Other_1", ...tail), "{}");
    await writeFile(join(root, "plain.json"), "{}");
    const found = await locate([
      { pattern: join(root, "missing.json"), scope: "user" },
      { pattern: join(root, "Packages", "Claude_*", ...tail), scope: "user" },
      { pattern: join(root, "plain.json"), scope: "user" },
      { pattern: join(root, "plain.json"), scope: "project" },
      { pattern: join(root, "nowhere", "*", "x.json"), scope: "user" },
    ], "linux");
    assert.deepEqual(found, [file, join(root, "plain.json")]);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

Deno.test("locate() on a platform the files cannot be on finds nothing and does not throw", async () => {
  assert.deepEqual(await locate(claudeDesktopLocations(windows), "win32"), []);
});
