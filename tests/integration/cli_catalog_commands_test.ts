/**
 * `codemode servers`, `search` and `tools` as a user runs them: a real process, a HOME holding real
 * client configs (the fixtures in tests/testdata plus server-everything from npm), JSON output for scripts.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { fakeHome, ROOT } from "./_serve.ts";

const exec = promisify(execFile);
const FIXTURES = join(ROOT, "tests/testdata/client-configs");

/** A HOME with server-everything/-memory (MCPs dir), Claude Desktop's fixture and a broken file. */
function home(): string {
  const dir = fakeHome();
  mkdirSync(join(dir, ".config/Claude"), { recursive: true });
  copyFileSync(
    join(FIXTURES, "claude-desktop/claude_desktop_config.json"),
    join(dir, ".config/Claude/claude_desktop_config.json"),
  );
  copyFileSync(join(FIXTURES, "mcps-dir/broken.json"), join(dir, "MCPs/broken.json"));
  return dir;
}

async function codemode(
  dir: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(join(ROOT, "node_modules/.bin/deno"), [
      "run",
      "-A",
      "--quiet",
      join(ROOT, "cli.ts"),
      ...args,
    ], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "", HOME: dir, CODEMODE_STATE_DIR: join(dir, "state"), NO_COLOR: "1" },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

Deno.test("servers --json lists every configured server with provenance, skips and diagnostics", async () => {
  const dir = home();
  const r = await codemode(dir, "servers", "--json");
  assert.equal(r.code, 1, "a broken config file is an error: exit 1");
  const report = JSON.parse(r.stdout);
  const names = report.servers.map((s: { name: string }) => s.name);
  assert.deepEqual(names, ["everything", "filesystem", "memory"]);
  const memory = report.servers.find((s: { name: string }) => s.name === "memory");
  assert.equal(memory.source.plugin, "mcps_dir", "the MCPs dir entry wins over Claude Desktop's");
  assert.deepEqual(memory.shadowed, [join(dir, ".config/Claude/claude_desktop_config.json")]);
  assert.deepEqual(report.skipped.map((s: { name: string }) => s.name), ["codemode"]);
  assert.ok(
    report.diagnostics.some((d: { file: string; severity: string }) =>
      d.file.endsWith("broken.json") && d.severity === "error"
    ),
  );
});

Deno.test("search --json builds the index once, then answers from the cache", async () => {
  const dir = home();
  const first = await codemode(dir, "search", "sum of two numbers", "--json", "--server", "everything");
  assert.equal(first.code, 0, first.stderr);
  const hits = JSON.parse(first.stdout);
  assert.equal(hits[0].server, "everything");
  assert.equal(hits[0].tool, "get-sum");
  assert.deepEqual(Object.keys(hits[0]).sort(), ["description", "score", "server", "tool"]);
  const started = performance.now();
  const again = await codemode(
    dir,
    "search",
    "ecoh mesage",
    "--json",
    "--limit",
    "2",
    "--server",
    "everything",
  );
  const ms = performance.now() - started;
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout)[0].tool, "echo", "typos still find echo");
  console.log(`cached search took ${ms.toFixed(0)} ms (whole process, from source)`);
});

Deno.test("tools --json shows a server's tools with schemas and Python signatures", async () => {
  const dir = home();
  const r = await codemode(dir, "tools", "everything", "--json");
  assert.equal(r.code, 0, r.stderr);
  const tools = JSON.parse(r.stdout);
  const sum = tools.find((t: { tool: string }) => t.tool === "get-sum");
  assert.equal(sum.alias, "get_sum");
  assert.match(sum.signature, /^get_sum\(\*, a: (float|int), b: (float|int)\)$/);
  const unknown = await codemode(dir, "tools", "nope");
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /Unknown server "nope"/);
});

Deno.test("search, tools and servers follow the policy: a refused server is never started and refused tools are not shown", async () => {
  const marker = join(Deno.makeTempDirSync(), "spy-started");
  const everything = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
  const dir = fakeHome({
    spy: { command: "sh", args: ["-c", `touch '${marker}'; exec node '${everything}' stdio`] },
  });
  writeFileSync(join(dir, "codemode.yaml"), "denyServers: [spy]\ndenyTools: ['everything/get-env']\n");

  const search = await codemode(dir, "search", "environment variables echo", "--json", "--limit", "50");
  assert.equal(search.code, 0, search.stderr);
  const hits = JSON.parse(search.stdout) as { server: string; tool: string }[];
  assert.ok(hits.some((h) => h.server === "everything" && h.tool === "echo"));
  assert.ok(!hits.some((h) => h.server === "spy"), "a refused server is not searched");
  assert.ok(!hits.some((h) => h.tool === "get-env"), "a refused tool is not shown");
  assert.ok(!existsSync(marker), "the refused server was never started");

  const tools = await codemode(dir, "tools", "spy", "--json");
  assert.equal(tools.code, 1);
  assert.match(tools.stderr, /"spy" is denied by policy/);
  const everythingTools = await codemode(dir, "tools", "everything", "--json");
  assert.ok(!JSON.parse(everythingTools.stdout).some((t: { tool: string }) => t.tool === "get-env"));

  const servers = JSON.parse((await codemode(dir, "servers", "--json")).stdout);
  const spy = servers.servers.find((s: { name: string }) => s.name === "spy");
  assert.equal(spy.state, "refused");
  assert.match(spy.refused, /denyServers/);
  assert.ok(!existsSync(marker), "listing servers started nothing either");
});
