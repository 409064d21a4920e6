import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DiscoveryContext, DiscoveryPlugin } from "../../core/contracts/discovery.ts";
import { claudeCode, codex, cursor, vscode } from "../../plugins/discovery/mod.ts";

/** Writes one file into a fresh temp dir and reads it with the plugin. */
async function readOne(plugin: DiscoveryPlugin, name: string, text: string, cwd = "/nowhere") {
  const root = await mkdtemp(join(tmpdir(), "codemode-discovery-"));
  try {
    const file = join(root, name);
    await writeFile(file, text);
    const context: DiscoveryContext = { home: root, cwd, platform: "linux", env: {} };
    return { file, ...await plugin.read(file, context) };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

Deno.test("a bad entry yields a diagnostic for that server and the other entries still load", async () => {
  const text = JSON.stringify({
    mcpServers: {
      good: { command: "node", args: ["server.js", 8080, true] },
      badArgs: { command: "node", args: "server.js" },
      noCommand: { args: ["x"] },
      badType: { type: "websocket", url: "ws://x" },
      noUrl: { type: "sse" },
      notAnObject: "npx thing",
      off: { command: "node", disabled: true },
    },
  });
  const { file, servers, diagnostics } = await readOne(cursor(), "mcp.json", text);
  assert.deepEqual(servers.map((s) => [s.name, s.args]), [["good", ["server.js", "8080", "true"]]]);
  assert.deepEqual(diagnostics.map((d) => [d.severity, d.file, d.server]), [
    ["error", file, "badArgs"],
    ["error", file, "noCommand"],
    ["error", file, "badType"],
    ["error", file, "noUrl"],
    ["error", file, "notAnObject"],
  ]);
  assert.equal(
    diagnostics[0].message,
    `Server "badArgs" in "${file}" is invalid: args: Invalid input: expected array, received string; ` +
      "fix or remove the entry",
  );
  assert.match(diagnostics[1].message, /command: a stdio server needs a command/);
  assert.match(diagnostics[2].message, /type: unknown transport "websocket"/);
  assert.match(diagnostics[3].message, /url: an SSE server needs a URL/);
});

Deno.test("a server map of the wrong shape is a file diagnostic, not an exception", async () => {
  const { file, servers, diagnostics } = await readOne(cursor(), "mcp.json", '{ "mcpServers": ["a", "b"] }');
  assert.deepEqual(servers, []);
  assert.deepEqual(diagnostics, [{
    severity: "error",
    file,
    message: `Cannot use "${file}": "mcpServers" must be an object of servers, got an array; fix the file`,
  }]);
  const top = await readOne(vscode(), "mcp.json", "[1, 2]");
  assert.deepEqual(top.diagnostics.map((d) => d.message), [
    `Cannot use "${top.file}": expected a JSON object at the top; fix the file`,
  ]);
});

Deno.test("a file without any server list gives no servers and no diagnostics", async () => {
  assert.deepEqual(
    (await readOne(claudeCode(), ".claude.json", '{ "numStartups": 3 }')).diagnostics,
    [],
  );
  assert.deepEqual((await readOne(codex(), "config.toml", 'model = "x"')).servers, []);
});

Deno.test("an unreadable file is a diagnostic that says so", async () => {
  const root = await mkdtemp(join(tmpdir(), "codemode-discovery-"));
  try {
    const dir = join(root, "mcp.json");
    await mkdir(dir);
    const result = await cursor().read(dir, { home: root, cwd: root, platform: "linux", env: {} });
    assert.deepEqual(result.servers, []);
    assert.equal(result.diagnostics.length, 1);
    assert.ok(result.diagnostics[0].message.startsWith(`Cannot read "${dir}": `));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

Deno.test("broken TOML is a diagnostic with the parser's first line", async () => {
  const { file, servers, diagnostics } = await readOne(codex(), "config.toml", "[mcp_servers.x\ncommand = 1");
  assert.deepEqual(servers, []);
  assert.equal(diagnostics.length, 1);
  assert.equal(diagnostics[0].severity, "error");
  assert.equal(
    diagnostics[0].message,
    `Cannot parse "${file}": Invalid TOML document: illegal character in key at line 1; fix the TOML syntax`,
  );
  assert.ok(!diagnostics[0].message.includes("\n"));
});

Deno.test("codex() reports a bad table, skips disabled ones and forwards env_vars that are set", async () => {
  const toml = `
[mcp_servers.bad]
args = ["x"]
[mcp_servers.off]
command = "x"
enabled = false
[mcp_servers.fwd]
command = "x"
env_vars = ["HOME", "NOT_SET"]
env = { A = "1" }
tool_timeout_sec = 5
startup_timeout_sec = 60
`;
  const root = await mkdtemp(join(tmpdir(), "codemode-discovery-"));
  try {
    const file = join(root, "config.toml");
    await writeFile(file, toml);
    const context = { home: root, cwd: root, platform: "linux", env: { HOME: "/home/alice" } };
    const { servers, diagnostics } = await codex().read(file, context);
    assert.deepEqual(servers.map((s) => [s.name, s.env, s.timeoutMs]), [["fwd", {
      HOME: "/home/alice",
      A: "1",
    }, 5000]]);
    assert.deepEqual(diagnostics.map((d) => [d.severity, d.server]), [["error", "bad"]]);
    assert.match(diagnostics[0].message, /command or url: a server needs one of them/);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

Deno.test("claudeCode() reports a malformed projects object and still reads user servers", async () => {
  const text = JSON.stringify({ mcpServers: { a: { command: "x" } }, projects: ["oops"] });
  const { file, servers, diagnostics } = await readOne(claudeCode(), ".claude.json", text);
  assert.deepEqual(servers.map((s) => s.name), ["a"]);
  assert.deepEqual(diagnostics.map((d) => d.message), [
    `Cannot use "projects" in "${file}": expected an object; fix the file`,
  ]);
});
