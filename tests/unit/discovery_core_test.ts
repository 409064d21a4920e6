import assert from "node:assert/strict";
import { homedir } from "node:os";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { DiscoveryContext, DiscoveryPlugin, ServerSpec } from "../../core/contracts/discovery.ts";
import { defaultDiscoveryContext, discoverServers, selfReference } from "../../core/config/discovery.ts";
import {
  claudeCode,
  claudeDesktop,
  cursor,
  defaultDiscoveryPlugins,
  mcpsDir,
} from "../../plugins/discovery/mod.ts";

const FIXTURES = new URL("../testdata/client-configs/", import.meta.url);

function fixture(name: string): Promise<string> {
  return readFile(new URL(name, FIXTURES), "utf8");
}

/** Lays files out under a fresh temp root with `home/` and `work/` (the cwd), runs the test, cleans up. */
async function withTree(
  files: (root: string) => Record<string, string> | Promise<Record<string, string>>,
  test: (context: DiscoveryContext, root: string) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), "codemode-discovery-"));
  try {
    for (const [path, text] of Object.entries(await files(root))) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
    await test({ home: join(root, "home"), cwd: join(root, "work"), platform: "linux", env }, root);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Every fixture at the place its client keeps it; the Claude Code project key points at the temp cwd. */
async function allFixtures(root: string): Promise<Record<string, string>> {
  const claudeJson = (await fixture("claude-code/.claude.json"))
    .replace('"/home/alice/work/app"', JSON.stringify(join(root, "work")));
  return {
    "home/.config/Claude/claude_desktop_config.json": await fixture(
      "claude-desktop/claude_desktop_config.json",
    ),
    "home/.claude.json": claudeJson,
    "work/.mcp.json": await fixture("claude-code/.mcp.json"),
    "work/.vscode/mcp.json": await fixture("vscode/mcp.json"),
    "home/.cursor/mcp.json": await fixture("cursor/mcp.json"),
    "home/.codeium/windsurf/mcp_config.json": await fixture("windsurf/mcp_config.json"),
    "home/.gemini/settings.json": await fixture("gemini/settings.json"),
    "home/.codex/config.toml": await fixture("codex/config.toml"),
    "home/MCPs/broken.json": await fixture("mcps-dir/broken.json"),
    "home/MCPs/filesystem.json": await fixture("mcps-dir/filesystem.json"),
  };
}

const ENV = {
  FIGMA_TOKEN: "fig",
  LINEAR_KEY: "lin",
  GOOGLE_MAPS_API_KEY: "maps",
  API_KEY: "k",
  SLACK_BOT_TOKEN: "x",
};

const byName = (servers: ServerSpec[], name: string): ServerSpec => {
  const found = servers.find((s) => s.name === name);
  assert.ok(found, `no server "${name}"`);
  return found;
};

Deno.test("discoverServers() reads every fixture, expands variables, skips what it cannot use", async () => {
  await withTree(allFixtures, async (context, root) => {
    const found = await discoverServers(context, defaultDiscoveryPlugins());
    const home = (p: string) => join(root, "home", p);
    const work = (p: string) => join(root, "work", p);

    assert.deepEqual(found.servers.map((s) => s.name), [
      "docs",
      "events",
      "everything",
      "figma",
      "filesystem",
      "github",
      "google-maps",
      "linear",
      "memory",
      "postgres",
      "remote",
      "remote-tools",
      "sequential-thinking",
      "slack",
      "stream",
      "workspace-files",
    ]);
    assert.deepEqual(found.files, [
      { plugin: "claude_desktop", path: home(".config/Claude/claude_desktop_config.json"), servers: 3 },
      { plugin: "claude_code", path: home(".claude.json"), servers: 3 },
      { plugin: "claude_code", path: work(".mcp.json"), servers: 2 },
      { plugin: "vscode", path: work(".vscode/mcp.json"), servers: 3 },
      { plugin: "cursor", path: home(".cursor/mcp.json"), servers: 2 },
      { plugin: "windsurf", path: home(".codeium/windsurf/mcp_config.json"), servers: 2 },
      { plugin: "gemini", path: home(".gemini/settings.json"), servers: 2 },
      { plugin: "codex", path: home(".codex/config.toml"), servers: 2 },
      { plugin: "mcps_dir", path: home("MCPs/broken.json"), servers: 0 },
      { plugin: "mcps_dir", path: home("MCPs/filesystem.json"), servers: 1 },
    ]);

    // broken.json is one diagnostic; the unset GITHUB_TOKEN a warning; ${input:brave-key} an error.
    assert.deepEqual(found.diagnostics.map((d) => [d.severity, d.file, d.server]), [
      ["warning", home(".claude.json"), "github"],
      ["error", work(".vscode/mcp.json"), "brave-search"],
      ["error", home("MCPs/broken.json"), undefined],
    ]);
    assert.match(found.diagnostics[0].message, /^Environment variable "GITHUB_TOKEN" is not set/);

    assert.deepEqual(found.skipped, [
      {
        name: "codemode",
        source: {
          plugin: "claude_desktop",
          file: home(".config/Claude/claude_desktop_config.json"),
          key: "mcpServers.codemode",
          scope: "user",
        },
        reason: 'would launch codemode itself ("codemode serve")',
      },
      {
        name: "brave-search",
        source: {
          plugin: "vscode",
          file: work(".vscode/mcp.json"),
          key: 'servers["brave-search"]',
          scope: "workspace",
        },
        reason: 'needs "${input:brave-key}", which only the client that owns the config can prompt for',
      },
    ]);

    assert.deepEqual(byName(found.servers, "github").env, { GITHUB_PERSONAL_ACCESS_TOKEN: "" });
    assert.deepEqual(byName(found.servers, "docs").headers, { Authorization: "Bearer none" });
    assert.deepEqual(byName(found.servers, "workspace-files").args, [
      "-y",
      "@modelcontextprotocol/server-filesystem",
      context.cwd,
    ]);
    assert.deepEqual(byName(found.servers, "linear").headers, { Authorization: "Bearer lin" });
    assert.deepEqual(byName(found.servers, "stream").headers, { "X-Key": "k" });
    assert.deepEqual(byName(found.servers, "google-maps").env, { GOOGLE_MAPS_API_KEY: "maps" });
    assert.deepEqual(byName(found.servers, "figma").headers, { Authorization: "Bearer fig" });
    assert.equal(byName(found.servers, "postgres").source.scope, "local");

    // Two clients define "filesystem" and "memory": MCPs dir beats Claude Desktop, Codex beats Claude Desktop.
    const filesystem = byName(found.servers, "filesystem");
    assert.equal(filesystem.source.plugin, "mcps_dir");
    assert.deepEqual(filesystem.shadowed, [{
      plugin: "claude_desktop",
      file: home(".config/Claude/claude_desktop_config.json"),
      key: "mcpServers.filesystem",
      scope: "user",
    }]);
    const memory = byName(found.servers, "memory");
    assert.equal(memory.source.plugin, "codex");
    assert.equal(memory.timeoutMs, 20000);
    assert.deepEqual(memory.shadowed?.map((s) => s.plugin), ["claude_desktop"]);
    assert.equal(byName(found.servers, "slack").shadowed, undefined);
  }, ENV);
});

Deno.test("discoverServers() gives DOCS_TOKEN's value over the default when it is set", async () => {
  await withTree(allFixtures, async (context) => {
    const found = await discoverServers(context, [claudeCode()]);
    assert.deepEqual(byName(found.servers, "docs").headers, { Authorization: "Bearer abc" });
    assert.deepEqual(byName(found.servers, "github").env, { GITHUB_PERSONAL_ACCESS_TOKEN: "ghp" });
    assert.deepEqual(found.diagnostics, []);
  }, { DOCS_TOKEN: "abc", GITHUB_TOKEN: "ghp" });
});

Deno.test("discoverServers() keeps the codemode entry when allowSelf is set", async () => {
  await withTree(allFixtures, async (context) => {
    const found = await discoverServers(context, [claudeDesktop()], { allowSelf: true });
    assert.deepEqual(found.servers.map((s) => s.name), ["codemode", "filesystem", "memory"]);
    assert.deepEqual(found.skipped, []);
    const skipped = await discoverServers(context, [claudeDesktop()]);
    assert.deepEqual(skipped.servers.map((s) => s.name), ["filesystem", "memory"]);
  });
});

const server = (command = "node") => ({ command, args: ["s.js"] });

Deno.test("discoverServers() ranks Claude Code local over project over user", async () => {
  await withTree((root) => ({
    "home/.claude.json": JSON.stringify({
      mcpServers: { db: server("user"), onlyUser: server() },
      projects: { [join(root, "work")]: { mcpServers: { db: server("local") } } },
    }),
    "work/.mcp.json": JSON.stringify({ mcpServers: { db: server("project"), onlyUser: server("project") } }),
  }), async (context, root) => {
    const found = await discoverServers(context, [claudeCode()]);
    const db = byName(found.servers, "db");
    assert.equal(db.command, "local");
    assert.deepEqual(db.shadowed, [
      { plugin: "claude_code", file: join(root, "work/.mcp.json"), key: "mcpServers.db", scope: "project" },
      { plugin: "claude_code", file: join(root, "home/.claude.json"), key: "mcpServers.db", scope: "user" },
    ]);
    assert.equal(byName(found.servers, "onlyUser").command, "project");
  });
});

Deno.test("discoverServers() ranks scopes first and plugin order second across clients", async () => {
  const files = (root: string) => ({
    "home/.config/Claude/claude_desktop_config.json": JSON.stringify({
      mcpServers: { db: server("desktop") },
    }),
    "home/.claude.json": JSON.stringify({
      mcpServers: { db: server("code-user") },
      projects: { [join(root, "work")]: { mcpServers: { db: server("code-local") } } },
    }),
    "work/.mcp.json": JSON.stringify({ mcpServers: { db: server("code-project") } }),
    "work/.cursor/mcp.json": JSON.stringify({ mcpServers: { db: server("cursor-project") } }),
    "home/MCPs/a.json": JSON.stringify({ mcpServers: { db: server("mcps-user") } }),
  });
  await withTree(files, async (context) => {
    const plugins = [claudeDesktop(), claudeCode(), cursor(), mcpsDir()];
    const db = byName((await discoverServers(context, plugins)).servers, "db");
    assert.equal(db.command, "code-local");
    assert.deepEqual(db.shadowed?.map((s) => `${s.plugin}/${s.scope}`), [
      "cursor/project",
      "claude_code/project",
      "mcps_dir/user",
      "claude_code/user",
      "claude_desktop/user",
    ]);
    const withoutLocal = [claudeDesktop(), claudeCode({ scopes: ["user", "project"] }), cursor(), mcpsDir()];
    assert.equal(
      byName((await discoverServers(context, withoutLocal)).servers, "db").command,
      "cursor-project",
    );
    const userOnly = [claudeDesktop(), claudeCode({ scopes: ["user"] }), mcpsDir()];
    assert.equal(byName((await discoverServers(context, userOnly)).servers, "db").command, "mcps-user");
  });
});

Deno.test("discoverServers() lets a lower entry win when the higher one is skipped", async () => {
  await withTree(() => ({
    "home/.cursor/mcp.json": JSON.stringify({ mcpServers: { a: server("cursor"), me: server() } }),
    "work/.vscode/mcp.json": JSON.stringify({
      servers: {
        a: { command: "x", env: { K: "${input:k}" } },
        me: { command: "npx", args: ["-y", "codemode"] },
      },
    }),
  }), async (context) => {
    const found = await discoverServers(context, defaultDiscoveryPlugins());
    assert.equal(byName(found.servers, "a").command, "cursor");
    assert.equal(byName(found.servers, "me").command, "node");
    assert.deepEqual(found.skipped.map((s) => s.name), ["a", "me"]);
  });
});

Deno.test("discoverServers() turns a throwing plugin into a diagnostic and keeps the others", async () => {
  const broken: DiscoveryPlugin = {
    name: "broken",
    candidates: () => Promise.reject(new Error("boom")),
    read: () => Promise.reject(new Error("unreachable")),
  };
  const half: DiscoveryPlugin = {
    name: "half",
    candidates: () => Promise.resolve(["/a", "/b"]),
    read: (path) =>
      path === "/a" ? Promise.reject(new Error("bad read")) : Promise.resolve({
        servers: [{
          name: "ok",
          transport: "stdio",
          command: "x",
          source: { plugin: "half", file: "/b", key: "ok" },
        }],
        diagnostics: [],
      }),
  };
  const found = await discoverServers({ home: "/h", cwd: "/c", platform: "linux", env: {} }, [broken, half]);
  assert.deepEqual(found.servers.map((s) => s.name), ["ok"]);
  assert.deepEqual(found.files, [{ plugin: "half", path: "/a", servers: 0 }, {
    plugin: "half",
    path: "/b",
    servers: 1,
  }]);
  assert.deepEqual(found.diagnostics.map((d) => d.message), [
    'Discovery plugin "broken" failed on "broken": boom; report this as a bug',
    'Discovery plugin "half" failed on "/a": bad read; report this as a bug',
  ]);
});

const stdio = (command: string, ...args: string[]): ServerSpec => ({
  name: "s",
  transport: "stdio",
  command,
  args,
  source: { plugin: "t", file: "/f", key: "k" },
});

Deno.test("selfReference() recognises the ways codemode gets launched", () => {
  const self = [
    stdio("codemode", "serve"),
    stdio("/usr/local/bin/codemode", "serve"),
    stdio("C:\\Tools\\codemode.exe", "serve"),
    stdio("deno", "task", "codemode", "serve"),
    stdio("deno", "task", "--cwd", "/src/codemode", "codemode", "serve"),
    stdio("npx", "-y", "codemode", "serve"),
    stdio("npx", "-y", "codemode@0.1.0", "serve"),
    stdio("bunx", "@codemode/codemode", "serve"),
    stdio("pnpm", "dlx", "codemode", "serve"),
    stdio("deno", "run", "-A", "npm:codemode", "serve"),
    stdio("deno", "run", "-A", "/home/alice/src/codemode/cli.ts", "serve"),
    stdio("bun", "run", "/home/alice/codemode-main/cli.ts", "serve"),
    stdio("sh", "-c", "exec codemode serve --verbose"),
    stdio("cmd", "/c", "C:\\bin\\codemode.exe serve"),
    stdio("/opt/codemode-0.1.0-linux-x64", "serve"),
    stdio("/Users/alice/bin/codemode-0.2.0-darwin-arm64", "serve"),
    stdio("npx", "-y", "./codemode-0.1.0.tgz", "serve"),
    stdio("npm", "exec", "--yes", "/tmp/dl/codemode-0.1.0.tgz", "--", "serve"),
  ];
  for (const spec of self) {
    assert.ok(selfReference(spec), `not recognised: ${spec.command} ${spec.args?.join(" ")}`);
  }
  assert.equal(selfReference(self[0]), 'would launch codemode itself ("codemode serve")');
});

Deno.test("selfReference() leaves other servers alone, even ones that mention codemode", () => {
  const others: ServerSpec[] = [
    stdio("npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/alice/codemode"),
    stdio("deno", "run", "-A", "/home/alice/src/codemode/cli.ts", "search", "x"),
    stdio("deno", "run", "-A", "/home/alice/src/other/cli.ts", "serve"),
    stdio("node", "codemode-helper.js"),
    stdio("/opt/codemode-helper-linux-x64", "serve"),
    stdio("npx", "-y", "./codemode-helper-1.0.0.tgz", "serve"),
    stdio("uvx", "mcp-server-git", "--repository", "/src/codemode"),
    { ...stdio("x"), transport: "http", command: undefined, url: "http://localhost/codemode" },
  ];
  for (const spec of others) {
    assert.equal(selfReference(spec), undefined, `${spec.command} ${spec.args?.join(" ")}`);
  }
});

Deno.test("defaultDiscoveryContext() describes this machine", () => {
  const context = defaultDiscoveryContext();
  assert.equal(context.home, homedir());
  assert.equal(context.cwd, Deno.cwd());
  assert.equal(context.platform, Deno.build.os === "windows" ? "win32" : Deno.build.os);
  assert.equal(context.env.PATH, Deno.env.get("PATH"));
});
