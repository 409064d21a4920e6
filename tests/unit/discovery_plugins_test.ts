import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { DiscoveryContext } from "../../core/contracts/discovery.ts";
import {
  claudeCode,
  claudeDesktop,
  codex,
  cursor,
  gemini,
  mcpsDir,
  vscode,
  windsurf,
} from "../../plugins/discovery/mod.ts";

const FIXTURES = new URL("../testdata/client-configs/", import.meta.url);

function fixture(name: string): Promise<string> {
  return readFile(new URL(name, FIXTURES), "utf8");
}

/** Lays files out under a fresh temp root with `home/` and `work/` (the cwd), runs the test, cleans up. */
async function withTree(
  files: Record<string, string>,
  test: (root: string, context: DiscoveryContext) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), "codemode-discovery-"));
  try {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
    await test(root, { home: join(root, "home"), cwd: join(root, "work"), platform: "linux", env });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

const NPX = "npx";

Deno.test("claudeDesktop() reads the Linux config file with every server and its provenance", async () => {
  const rel = "home/.config/Claude/claude_desktop_config.json";
  await withTree(
    { [rel]: await fixture("claude-desktop/claude_desktop_config.json") },
    async (root, context) => {
      const plugin = claudeDesktop();
      const file = join(root, rel);
      assert.deepEqual(await plugin.candidates(context), [file]);
      const source = (key: string) => ({ plugin: "claude_desktop", file, key, scope: "user" });
      assert.deepEqual(await plugin.read(file, context), {
        servers: [
          {
            name: "filesystem",
            transport: "stdio",
            command: NPX,
            args: ["-y", "@modelcontextprotocol/server-filesystem", "/Users/alice/Desktop"],
            source: source("mcpServers.filesystem"),
          },
          {
            name: "memory",
            transport: "stdio",
            command: NPX,
            args: ["-y", "@modelcontextprotocol/server-memory"],
            source: source("mcpServers.memory"),
          },
          {
            name: "codemode",
            transport: "stdio",
            command: "codemode",
            args: ["serve"],
            source: source("mcpServers.codemode"),
          },
        ],
        diagnostics: [],
      });
    },
  );
});

Deno.test("claudeCode() reads user and local scopes from .claude.json and the project scope from .mcp.json", async () => {
  await withTree({
    "home/.claude.json": await fixture("claude-code/.claude.json"),
    "work/.mcp.json": await fixture("claude-code/.mcp.json"),
  }, async (root, context) => {
    const plugin = claudeCode();
    const user = join(root, "home/.claude.json");
    const project = join(root, "work/.mcp.json");
    assert.deepEqual(await plugin.candidates(context), [user, project]);

    const local = await plugin.read(user, { ...context, cwd: "/home/alice/work/app" });
    assert.deepEqual(local, {
      servers: [
        {
          name: "github",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-github"],
          env: { GITHUB_PERSONAL_ACCESS_TOKEN: "${GITHUB_TOKEN}" },
          source: { plugin: "claude_code", file: user, key: "mcpServers.github", scope: "user" },
        },
        {
          name: "docs",
          transport: "http",
          url: "https://mcp.example.com/mcp",
          headers: { Authorization: "Bearer ${DOCS_TOKEN:-none}" },
          source: { plugin: "claude_code", file: user, key: "mcpServers.docs", scope: "user" },
        },
        {
          name: "postgres",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-postgres", "postgresql://localhost/app"],
          source: {
            plugin: "claude_code",
            file: user,
            key: 'projects["/home/alice/work/app"].mcpServers.postgres',
            scope: "local",
          },
        },
      ],
      diagnostics: [],
    });
    // Another working directory has no local servers.
    assert.deepEqual((await plugin.read(user, context)).servers.map((s) => s.name), ["github", "docs"]);

    assert.deepEqual(await plugin.read(project, context), {
      servers: [
        {
          name: "sequential-thinking",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-sequential-thinking"],
          source: {
            plugin: "claude_code",
            file: project,
            key: 'mcpServers["sequential-thinking"]',
            scope: "project",
          },
        },
        {
          name: "events",
          transport: "sse",
          url: "http://localhost:9000/sse",
          source: { plugin: "claude_code", file: project, key: "mcpServers.events", scope: "project" },
        },
      ],
      diagnostics: [],
    });
  });
});

Deno.test("claudeCode() finds .claude.json in $CLAUDE_CONFIG_DIR instead of home", async () => {
  await withTree({
    "conf/.claude.json": await fixture("claude-code/.claude.json"),
    "home/.claude.json": "{}",
  }, async (root, context) => {
    const ctx = { ...context, env: { CLAUDE_CONFIG_DIR: join(root, "conf") } };
    assert.deepEqual(await claudeCode().candidates(ctx), [join(root, "conf/.claude.json")]);
  });
});

Deno.test("vscode() reads top-level servers with the workspace scope and keeps ${input:...} for core", async () => {
  await withTree({ "work/.vscode/mcp.json": await fixture("vscode/mcp.json") }, async (root, context) => {
    const plugin = vscode();
    const file = join(root, "work/.vscode/mcp.json");
    assert.deepEqual(await plugin.candidates(context), [file]);
    const source = (key: string) => ({ plugin: "vscode", file, key, scope: "workspace" });
    assert.deepEqual(await plugin.read(file, context), {
      servers: [
        {
          name: "brave-search",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-brave-search"],
          env: { BRAVE_API_KEY: "${input:brave-key}" },
          source: source('servers["brave-search"]'),
        },
        {
          name: "workspace-files",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-filesystem", "${workspaceFolder}"],
          source: source('servers["workspace-files"]'),
        },
        {
          name: "remote-tools",
          transport: "http",
          url: "https://tools.example.com/mcp",
          source: source('servers["remote-tools"]'),
        },
      ],
      diagnostics: [],
    });
  });
});

Deno.test("vscode() resolves ${input:id} to the input's default and reads JSONC with comments", async () => {
  const text = `{
    // VS Code writes JSONC
    "inputs": [{ "type": "promptString", "id": "region", "default": "eu" }, { "id": "secret" }],
    "servers": { "a": { "command": "x", "args": ["\${input:region}", "\${input:secret}", "// not a comment",], }, },
  }`;
  await withTree({ "home/.config/Code/User/mcp.json": text }, async (root, context) => {
    const file = join(root, "home/.config/Code/User/mcp.json");
    const { servers, diagnostics } = await vscode().read(file, context);
    assert.deepEqual(diagnostics, []);
    assert.deepEqual(servers[0].args, ["eu", "${input:secret}", "// not a comment"]);
    assert.equal(servers[0].source.scope, "user");
  });
});

Deno.test("cursor() reads mcpServers from the user and the project file, a bare url being http", async () => {
  const text = await fixture("cursor/mcp.json");
  await withTree({ "home/.cursor/mcp.json": text, "work/.cursor/mcp.json": text }, async (root, context) => {
    const plugin = cursor();
    const user = join(root, "home/.cursor/mcp.json");
    const project = join(root, "work/.cursor/mcp.json");
    assert.deepEqual(await plugin.candidates(context), [user, project]);
    assert.deepEqual(await plugin.read(user, context), {
      servers: [
        {
          name: "slack",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-slack"],
          env: { SLACK_BOT_TOKEN: "${env:SLACK_BOT_TOKEN}", SLACK_TEAM_ID: "T0000" },
          source: { plugin: "cursor", file: user, key: "mcpServers.slack", scope: "user" },
        },
        {
          name: "linear",
          transport: "http",
          url: "https://mcp.linear.example/sse",
          headers: { Authorization: "Bearer ${env:LINEAR_KEY}" },
          source: { plugin: "cursor", file: user, key: "mcpServers.linear", scope: "user" },
        },
      ],
      diagnostics: [],
    });
    assert.deepEqual((await plugin.read(project, context)).servers.map((s) => s.source.scope), [
      "project",
      "project",
    ]);
    assert.deepEqual(await cursor({ scopes: ["project"] }).candidates(context), [project]);
  });
});

Deno.test("codex() reads [mcp_servers.*] tables, timeouts in ms and the bearer token from the environment", async () => {
  await withTree({ "home/.codex/config.toml": await fixture("codex/config.toml") }, async (root, context) => {
    const plugin = codex();
    const file = join(root, "home/.codex/config.toml");
    assert.deepEqual(await plugin.candidates(context), [file]);
    assert.deepEqual(await plugin.read(file, context), {
      servers: [
        {
          name: "memory",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-memory"],
          timeoutMs: 20000,
          source: { plugin: "codex", file, key: "mcp_servers.memory", scope: "user" },
        },
        {
          name: "figma",
          transport: "http",
          url: "https://mcp.figma.example/mcp",
          headers: { Authorization: "Bearer figma-secret" },
          source: { plugin: "codex", file, key: "mcp_servers.figma", scope: "user" },
        },
      ],
      diagnostics: [],
    });
  }, { FIGMA_TOKEN: "figma-secret" });
});

Deno.test("codex() warns and sends no Authorization header when the bearer token variable is unset", async () => {
  await withTree({ "codex-home/config.toml": await fixture("codex/config.toml") }, async (root, context) => {
    const file = join(root, "codex-home/config.toml");
    const ctx = { ...context, env: { CODEX_HOME: join(root, "codex-home") } };
    assert.deepEqual(await codex().candidates(ctx), [file]);
    const { servers, diagnostics } = await codex().read(file, ctx);
    assert.equal(servers[1].headers, undefined);
    assert.deepEqual(diagnostics, [{
      severity: "warning",
      file,
      server: "figma",
      message: 'Environment variable "FIGMA_TOKEN" (bearer_token_env_var) is not set: server "figma" goes ' +
        "without it; export it before starting codemode",
    }]);
  });
});

Deno.test("gemini() maps httpUrl to http and url to sse, timeout to timeoutMs and $VAR to ${VAR}", async () => {
  const sse = JSON.stringify({ mcpServers: { events: { url: "http://localhost:9000/sse" } } });
  await withTree({
    "home/.gemini/settings.json": await fixture("gemini/settings.json"),
    "work/.gemini/settings.json": sse,
  }, async (root, context) => {
    const plugin = gemini();
    const user = join(root, "home/.gemini/settings.json");
    const project = join(root, "work/.gemini/settings.json");
    assert.deepEqual(await plugin.candidates(context), [user, project]);
    assert.deepEqual(await plugin.read(user, context), {
      servers: [
        {
          name: "everything",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-everything"],
          cwd: "/tmp",
          timeoutMs: 30000,
          source: { plugin: "gemini", file: user, key: "mcpServers.everything", scope: "user" },
        },
        {
          name: "stream",
          transport: "http",
          url: "http://localhost:8080/mcp",
          headers: { "X-Key": "${API_KEY}" },
          source: { plugin: "gemini", file: user, key: "mcpServers.stream", scope: "user" },
        },
      ],
      diagnostics: [],
    });
    assert.deepEqual((await plugin.read(project, context)).servers, [{
      name: "events",
      transport: "sse",
      url: "http://localhost:9000/sse",
      source: { plugin: "gemini", file: project, key: "mcpServers.events", scope: "project" },
    }]);
  });
});

Deno.test("windsurf() reads serverUrl as an http remote", async () => {
  const rel = "home/.codeium/windsurf/mcp_config.json";
  await withTree({ [rel]: await fixture("windsurf/mcp_config.json") }, async (root, context) => {
    const file = join(root, rel);
    assert.deepEqual(await windsurf().candidates(context), [file]);
    assert.deepEqual(await windsurf().read(file, context), {
      servers: [
        {
          name: "google-maps",
          transport: "stdio",
          command: NPX,
          args: ["-y", "@modelcontextprotocol/server-google-maps"],
          env: { GOOGLE_MAPS_API_KEY: "${env:GOOGLE_MAPS_API_KEY}" },
          source: { plugin: "windsurf", file, key: 'mcpServers["google-maps"]', scope: "user" },
        },
        {
          name: "remote",
          transport: "http",
          url: "https://remote.example.com/mcp",
          source: { plugin: "windsurf", file, key: "mcpServers.remote", scope: "user" },
        },
      ],
      diagnostics: [],
    });
  });
});

Deno.test("mcpsDir() lists *.json in name order; broken.json is a diagnostic and filesystem.json loads", async () => {
  await withTree({
    "home/MCPs/filesystem.json": await fixture("mcps-dir/filesystem.json"),
    "home/MCPs/broken.json": await fixture("mcps-dir/broken.json"),
    "home/MCPs/notes.txt": "not a config",
    "work/mcp-servers/x.json": "{}",
  }, async (root, context) => {
    const plugin = mcpsDir();
    const broken = join(root, "home/MCPs/broken.json");
    const good = join(root, "home/MCPs/filesystem.json");
    const project = join(root, "work/mcp-servers/x.json");
    assert.deepEqual(await plugin.candidates(context), [broken, good, project]);

    const bad = await plugin.read(broken, context);
    assert.deepEqual(bad.servers, []);
    assert.equal(bad.diagnostics.length, 1);
    assert.equal(bad.diagnostics[0].severity, "error");
    assert.equal(bad.diagnostics[0].file, broken);
    assert.ok(
      bad.diagnostics[0].message.startsWith(`Cannot parse "${broken}": `),
      bad.diagnostics[0].message,
    );
    assert.ok(bad.diagnostics[0].message.endsWith("; fix the JSON syntax"));

    assert.deepEqual(await plugin.read(good, context), {
      servers: [{
        name: "filesystem",
        transport: "stdio",
        command: NPX,
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
        cwd: "/tmp",
        description: "Read and write files under /tmp",
        source: { plugin: "mcps_dir", file: good, key: "mcpServers.filesystem", scope: "user" },
      }],
      diagnostics: [],
    });
    assert.deepEqual(await plugin.read(project, context), { servers: [], diagnostics: [] });
  });
});
