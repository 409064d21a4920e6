import assert from "node:assert/strict";
import pc from "picocolors";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { type ConfigFile, ConfigFileError, parseConfigFile } from "../../core/config/file.ts";
import { checkSettings, type DiscoveryFacts, runDoctor } from "../../core/doctor/checks.ts";
import { checkConfigFile } from "../../core/doctor/config.ts";
import { renderReport } from "../../cli/doctor.ts";

const FILE = "/proj/codemode.yaml";

function spec(name: string): ServerSpec {
  return {
    name,
    transport: "stdio",
    command: "node",
    args: [`${name}.js`],
    source: { plugin: "mcps_dir", file: "/h/MCPs/servers.json", key: `mcpServers.${name}` },
  };
}

const discovery: DiscoveryFacts = {
  servers: [spec("everything"), spec("github")],
  skipped: [],
  diagnostics: [],
  files: [{ plugin: "mcps_dir", path: "/h/MCPs/servers.json", servers: 2 }],
};

/** A doctor run with no runtimes and `config` as the config file; servers are "listed" by a fake. */
function doctor(config: ConfigFile | ConfigFileError | undefined, env: Record<string, string> = {}) {
  const started: string[] = [];
  return {
    started,
    report: runDoctor({
      version: "0.0.0",
      env: { HOME: "/h", CODEMODE_STATE_DIR: "/tmp", ...env },
      runtimes: [],
      discovery,
      listTools: (name) => (started.push(name), Promise.resolve([{}, {}])),
      sandbox: { command: ["python3"], bootstrap: () => ({ type: "shutdown" }) },
      configFile: config,
      configSearched: [FILE, "/h/.config/codemode/config.yaml"],
    }),
  };
}

Deno.test("checkSettings() names the config file as the source of its values, under the variables", () => {
  const file = parseConfigFile(FILE, "maxRuns: 3\nreadOnly: true\n");
  const { checks } = checkSettings({ HOME: "/h", CODEMODE_READ_ONLY: "0" }, file);
  const by = new Map(checks.map((c) => [c.key, c]));
  assert.deepEqual([by.get("maxRuns")!.value, by.get("maxRuns")!.source], [3, FILE]);
  assert.deepEqual([by.get("readOnly")!.value, by.get("readOnly")!.source], [false, "CODEMODE_READ_ONLY"]);
  assert.equal(by.get("runtime")!.source, "default");
});

Deno.test("a bad value or unknown key in the config file is a failed check with a fix naming the file", () => {
  const file = parseConfigFile(FILE, "maxRuns: many\nmaxRun: 2\n");
  const { settings, checks, problems } = checkSettings({ HOME: "/h" }, file);
  assert.equal(settings.maxRuns, undefined, "the default is used meanwhile");
  const maxRuns = checks.find((c) => c.key === "maxRuns")!;
  assert.equal(maxRuns.status, "fail");
  assert.equal(maxRuns.source, FILE);
  assert.equal(maxRuns.problem!.fix, `Fix or unset "maxRuns" in ${FILE}; the default is used meanwhile`);
  assert.deepEqual(problems.map((p) => [p.status, p.subject]), [["fail", `config ${FILE}`]]);
  assert.match(problems[0].message, /^Unknown key "maxRun"/);
});

Deno.test("checkConfigFile() tells a missing file, a broken one, and one that shadows another apart", () => {
  assert.equal(checkConfigFile(undefined, [FILE]).status, "info");
  const broken = checkConfigFile(new ConfigFileError(FILE, `Cannot parse config "${FILE}": bad`), [FILE]);
  assert.deepEqual([broken.status, broken.path, broken.problem!.message], [
    "fail",
    FILE,
    `Cannot parse config "${FILE}": bad`,
  ]);
  const shadowing = checkConfigFile(
    { path: FILE, values: {}, ignored: ["/h/.config/codemode/config.yaml"] },
    [],
  );
  assert.equal(shadowing.status, "warn");
  assert.match(shadowing.problem!.message, /"\/h\/.config\/codemode\/config.yaml" ignored/);
});

Deno.test("doctor reports the effective policy and never starts a refused server", async () => {
  const { report, started } = doctor(parseConfigFile(FILE, "denyServers: [git*]\nmaxToolCalls: 20\n"), {
    CODEMODE_MAX_SESSIONS: "4",
  });
  const r = await report;
  assert.deepEqual(started, ["everything"]);
  const github = r.servers.find((s) => s.name === "github")!;
  assert.equal(github.status, "info");
  assert.equal(
    github.problem!.message,
    `Server "github" is denied by policy (denyServers in ${FILE} has "git*")`,
  );
  assert.equal(r.policy.open, false);
  assert.deepEqual(r.policy.refusedServers.map((s) => s.name), ["github"]);
  const rule = (key: string) => r.policy.rules.find((x) => x.key === key)!;
  assert.deepEqual([rule("denyServers").value, rule("denyServers").source], [["git*"], FILE]);
  assert.deepEqual([rule("maxSessions").value, rule("maxSessions").source], [4, "CODEMODE_MAX_SESSIONS"]);
  assert.deepEqual([rule("maxTimeout").value, rule("maxTimeout").source], [120, "default"]);
  assert.equal(r.configFile.path, FILE);

  const text = renderReport(r, pc.createColors(false));
  assert.match(text, new RegExp(`codemode config  ✓ ${FILE}`));
  assert.match(text, /\nPolicy\n/);
  assert.match(text, /denyServers +│ git\* +│ \/proj\/codemode\.yaml/);
  assert.match(text, /maxTimeout +│ 120s +│ default/);
  assert.match(text, /· Server "github" is denied by policy/);
});

Deno.test("a broken config file fails doctor, which goes on with the environment and defaults", async () => {
  const r = await doctor(new ConfigFileError(FILE, `Cannot parse config "${FILE}": bad indent at line 2`))
    .report;
  assert.equal(r.ok, false);
  assert.ok(r.findings.some((f) => f.status === "fail" && f.subject === "config file"));
  assert.equal(r.policy.open, true);
  assert.match(
    renderReport(r, pc.createColors(false)),
    /codemode config {2}✗ \/proj\/codemode\.yaml \(unreadable, see below\)/,
  );
  const none = await doctor(undefined).report;
  assert.match(
    renderReport(none, pc.createColors(false)),
    /codemode config {2}· none \(looked for \/proj\/codemode\.yaml, /,
  );
  assert.match(renderReport(none, pc.createColors(false)), /Every configured server and tool is reachable/);
});
