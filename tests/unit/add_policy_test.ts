/**
 * What may be added from a registry: the settings (CODEMODE_REGISTRY_URL, CODEMODE_ADD_SERVERS,
 * CODEMODE_ADD_ALLOW/_DENY and their config keys), the add policy (globs over registry names and
 * `npm:`/`pypi:`/`remote:` packages, deny beating allow, refusals naming the rule and where it was set),
 * and servers kept in codemode's own config file: written with comments kept, 0600, and discovered again.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AddPolicy, addPolicyOf, addTarget } from "../../core/config/add_policy.ts";
import { loadSettings, resolveSettings } from "../../core/config/settings.ts";
import { parseConfigFile } from "../../core/config/file.ts";
import { keepServer } from "../../core/config/kept_servers.ts";
import { discoverServers, ownServers } from "../../core/config/discovery.ts";
import type { ServerSpec } from "../../core/contracts/discovery.ts";

Deno.test("registry settings: the official registry by default, off, a URL; adding is off unless asked for", () => {
  const defaults = loadSettings({});
  assert.equal(defaults.registryUrl, "https://registry.modelcontextprotocol.io");
  assert.equal(defaults.addServers, "off");
  assert.deepEqual(defaults.addAllow, ["*"]);
  assert.equal(defaults.addDeny, undefined);
  const set = loadSettings({
    CODEMODE_REGISTRY_URL: "https://mcp.corp.example/registry/",
    CODEMODE_ADD_SERVERS: "ASK",
    CODEMODE_ADD_ALLOW: "io.github.modelcontextprotocol/*, npm:@corp/*",
    CODEMODE_ADD_DENY: "remote:*.evil.example",
  });
  assert.equal(set.registryUrl, "https://mcp.corp.example/registry");
  assert.equal(set.addServers, "ask");
  assert.deepEqual(set.addAllow, ["io.github.modelcontextprotocol/*", "npm:@corp/*"]);
  assert.deepEqual(set.addDeny, ["remote:*.evil.example"]);
  assert.equal(loadSettings({ CODEMODE_REGISTRY_URL: "OFF" }).registryUrl, "off");
  const bad = resolveSettings({ CODEMODE_REGISTRY_URL: "ftp://x", CODEMODE_ADD_SERVERS: "yes" });
  assert.deepEqual(bad.problems.map((p) => p.message), [
    'Invalid CODEMODE_REGISTRY_URL="ftp://x": expected the registry\'s http(s) base URL, or off',
    'Invalid CODEMODE_ADD_SERVERS="yes": expected one of off, ask, allow',
  ]);
  const file = parseConfigFile("/etc/codemode.yaml", "add_servers: allow\nadd_allow: [npm:@corp/*]\n");
  const fromFile = loadSettings({}, file);
  assert.equal(fromFile.addServers, "allow");
  const verdict = addPolicyOf(fromFile).allows({ name: "io.x/y", target: "npm:other" });
  assert.match(
    verdict.ok ? "" : verdict.reason,
    /add_allow in \/etc\/codemode\.yaml allows only "npm:@corp\/\*"/,
  );
});

Deno.test("the add policy: off refuses all, deny beats allow, globs match the name or the package", () => {
  const off = new AddPolicy("off");
  assert.deepEqual(off.enabled(), {
    ok: false,
    reason:
      'Adding servers is off (CODEMODE_ADD_SERVERS is "off"); the user can set CODEMODE_ADD_SERVERS=ask to ' +
      "be asked",
  });
  const policy = new AddPolicy(
    "ask",
    ["io.github.modelcontextprotocol/*", "npm:@corp/*", "remote:mcp.corp.example"],
    ["*/server-everything", "npm:@corp/bad-*"],
    { deny: "CODEMODE_ADD_DENY" },
  );
  assert.equal(policy.enabled().ok, true);
  const npm = (name: string, pkg: string) => policy.allows({ name, target: addTarget("npm", pkg) });
  assert.equal(
    npm("io.github.modelcontextprotocol/server-memory", "@modelcontextprotocol/server-memory").ok,
    true,
  );
  assert.equal(npm("io.other/anything", "@corp/tool").ok, true, "the package glob allows it");
  assert.equal(
    policy.allows({ name: "io.other/r", target: addTarget("remote", "mcp.corp.example") }).ok,
    true,
  );
  assert.deepEqual(
    npm("io.github.modelcontextprotocol/server-everything", "@modelcontextprotocol/server-everything"),
    {
      ok: false,
      reason:
        '"io.github.modelcontextprotocol/server-everything" is denied by policy (CODEMODE_ADD_DENY has "*/server-everything")',
    },
  );
  assert.match(
    String((npm("io.other/x", "@corp/bad-one") as { reason: string }).reason),
    /has "npm:@corp\/bad-\*"/,
  );
  assert.deepEqual(npm("io.other/x", "left-pad"), {
    ok: false,
    reason: '"io.other/x" is not allowed by policy (CODEMODE_ADD_ALLOW allows only ' +
      '"io.github.modelcontextprotocol/*", "npm:@corp/*", "remote:mcp.corp.example")',
  });
  assert.equal(addTarget(undefined, "x"), undefined);
});

Deno.test("a kept server is written to codemode's config file, comments kept, 0600, and discovered again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-kept-"));
  const path = join(dir, "codemode.yaml");
  writeFileSync(path, "# my settings\ntimeout: 45s # longer runs\n");
  const spec: ServerSpec = {
    name: "memory",
    transport: "stdio",
    command: "npx",
    args: ["-y", "@modelcontextprotocol/server-memory@2026.8.31"],
    env: { MEMORY_API_KEY: "secret-value" },
    description: "knowledge graph",
    source: { plugin: "registry", file: "https://r.example", key: "io.x/memory@2026.8.31" },
  };
  const origin = {
    name: "io.github.modelcontextprotocol/server-memory",
    version: "2026.8.31",
    url: "https://r.example",
  };
  assert.equal(keepServer(spec, origin, { path }), path);
  const text = readFileSync(path, "utf8");
  assert.match(text, /^# my settings\ntimeout: 45s # longer runs\nservers:\n {2}memory:\n {4}command: npx\n/);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  const settings = loadSettings({}, parseConfigFile(path, text));
  assert.equal(settings.timeout, 45);
  assert.deepEqual(settings.keptServerProblems, []);
  const [kept] = settings.keptServers;
  assert.equal(kept.name, "memory");
  assert.deepEqual(kept.registry, origin);
  assert.deepEqual(kept.source, { plugin: "codemode", file: path, key: "servers.memory", scope: "user" });
  const discovery = await discoverServers(
    { home: dir, cwd: dir, platform: "linux", env: {} },
    [],
    { own: ownServers(settings) },
  );
  assert.deepEqual(discovery.servers.map((s) => [s.name, s.source.plugin, s.env?.MEMORY_API_KEY]), [
    ["memory", "codemode", "secret-value"],
  ]);
  assert.deepEqual(discovery.files, [{ plugin: "codemode", path, servers: 1 }]);

  // A JSON config stays JSON; a user config file is made where none exists; a bad entry is a diagnostic.
  const json = join(dir, "config.json");
  writeFileSync(json, '{"timeout": "40s"}');
  keepServer({ ...spec, name: "m2" }, origin, { path: json });
  assert.deepEqual(Object.keys(JSON.parse(readFileSync(json, "utf8")).servers), ["m2"]);
  const made = keepServer(spec, origin, undefined, { XDG_CONFIG_HOME: join(dir, "xdg") });
  assert.equal(made, join(dir, "xdg", "codemode", "config.yaml"));
  const broken = loadSettings(
    {},
    parseConfigFile(path, "servers:\n  a: {command: x, url: y}\n  b: {command: node}\n"),
  );
  assert.deepEqual(broken.keptServers.map((s) => s.name), ["b"]);
  assert.match(
    broken.keptServerProblems[0],
    /Invalid server "a" .*: expected either command \(stdio\) or url/,
  );
});
