import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  ImageStore,
  RuntimeDetection,
  RuntimePlugin,
  SandboxProcess,
  SandboxStartOptions,
} from "../../core/contracts/runtime.ts";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import type { HostFrame } from "../../core/sandbox/protocol.ts";
import {
  checkRuntime,
  explainFailure,
  type RuntimeCheck,
  type RuntimeCheckOptions,
} from "../../core/doctor/runtime.ts";
import {
  checkConfigs,
  checkServers,
  checkSettings,
  checkSkills,
  checkStateDir,
  chooseRuntime,
  type DiscoveryFacts,
  runDoctor,
} from "../../core/doctor/checks.ts";
import { renderReport } from "../../cli/doctor.ts";
import { colors } from "../../cli/_render.ts";
import { SkillStore } from "../../core/skills/store.ts";
import { skillRoots } from "../../core/skills/sources.ts";
import { fakeSandboxProcess } from "./_fake_runtime.ts";

const encoder = new TextEncoder();

/** A sandbox process that speaks the protocol: ready after bootstrap, `ok` for any execute. */
function speakingProcess(): SandboxProcess {
  return fakeSandboxProcess({
    python: "3.11.2",
    onExecute: (frame, send) => {
      send({ type: "output", id: frame.id, stream: "stdout", data: "ok\n" });
      send({ type: "done", id: frame.id, status: "ok" });
    },
  });
}

/** A sandbox process that dies at once with `stderr`, as an engine does when it cannot run a container. */
function failingProcess(stderr: string): SandboxProcess {
  return {
    stdout: new ReadableStream({ start: (c) => c.close() }),
    stderr: new ReadableStream({ start: (c) => (c.enqueue(encoder.encode(stderr)), c.close()) }),
    stdin: new WritableStream(),
    kill: () => Promise.resolve(),
    exited: Promise.resolve(126),
  };
}

interface FakeOptions {
  detection?: Partial<RuntimeDetection>;
  image?: boolean;
  start?: () => SandboxProcess;
}

function fakeRuntime(
  name: string,
  o: FakeOptions = {},
): RuntimePlugin & ImageStore & { started: SandboxStartOptions[] } {
  const started: SandboxStartOptions[] = [];
  return {
    name,
    started,
    detect: () =>
      Promise.resolve({
        name,
        available: true,
        version: "1.0",
        rootless: false,
        problems: [],
        ...o.detection,
      }),
    start: (options) => {
      started.push(options);
      return Promise.resolve((o.start ?? speakingProcess)());
    },
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
    imageExists: () => Promise.resolve(o.image ?? true),
    importImage: () => Promise.resolve(),
    pullImage: () => Promise.resolve(),
    tagImage: () => Promise.resolve(),
  };
}

const bootstrap = (): HostFrame => ({
  type: "bootstrap",
  modules: {},
  packages: [],
  main: "codemode_runtime",
  config: { max_output: 1000, servers: [] },
});

const options: RuntimeCheckOptions = {
  image: "codemode-sandbox:latest",
  limits: { memory: "256m", pids: 64 },
  command: ["python3", "-c", "boot"],
  bootstrap,
  maxOutput: 1000,
  startTimeoutMs: 2000,
};

function spec(name: string, file: string, extra: Partial<ServerSpec> = {}): ServerSpec {
  return {
    name,
    transport: "stdio",
    command: "node",
    args: [`${name}.js`],
    source: { plugin: "claude", file, key: `mcpServers.${name}` },
    ...extra,
  };
}

const noDiscovery: DiscoveryFacts = { servers: [], skipped: [], diagnostics: [], files: [] };

Deno.test("known engine failures are explained with the fix that works", () => {
  const crun = explainFailure(
    "podman",
    "Error: crun: cgroups in hybrid mode not supported: OCI runtime error",
  );
  assert.match(crun.fix!, /runc/);
  const rlimit = explainFailure("podman", "Error: runc: setrlimit `RLIMIT_NOFILE`: Operation not permitted");
  assert.match(rlimit.message, /ulimits/);
  const image = explainFailure("docker", "Unable to find image 'codemode-sandbox:latest' locally");
  assert.equal(image.fix, "Build it: codemode image build --runtime docker");
  const daemon = explainFailure(
    "docker",
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock",
  );
  assert.match(daemon.fix!, /dockerd/);
  const pids = explainFailure(
    "podman",
    'Error: runc create failed: error setting cgroup config for procHooks process: failed to write "10000000": ' +
      "write /sys/fs/cgroup/pids/libpod_parent/pids.max: invalid argument",
  );
  assert.equal(pids.fix, "Lower CODEMODE_PIDS, or unset it to use the default");
  const other = explainFailure(
    "podman",
    'Sandbox "x" failed to start: exit code 125: \nsomething odd happened\nmore',
  );
  assert.match(other.message, /"something odd happened"/);
});

Deno.test("a working runtime starts a real sandbox with the configured limits and reports its timings", async () => {
  const runtime = fakeRuntime("podman");
  const check = await checkRuntime(runtime, options);
  assert.equal(check.status, "ok");
  assert.equal(check.sandbox?.ok, true);
  assert.equal(check.sandbox?.python, "3.11.2");
  assert.equal(typeof check.sandbox?.startMs, "number");
  assert.deepEqual(check.image, { ref: "codemode-sandbox:latest", present: true });
  assert.equal(runtime.started.length, 1);
  assert.deepEqual(runtime.started[0].limits, options.limits);
  assert.deepEqual(runtime.started[0].command, options.command);
  assert.equal(runtime.started[0].labels["codemode.managed"], "true");
  assert.equal(runtime.started[0].labels["codemode.owner-pid"], String(process.pid));
});

Deno.test("a runtime whose sandbox fails to start is broken, with the engine's error explained", async () => {
  const runtime = fakeRuntime("podman", {
    start: () => failingProcess("Error: crun: cgroups in hybrid mode not supported: OCI runtime error\n"),
  });
  const check = await checkRuntime(runtime, options);
  assert.equal(check.status, "fail");
  assert.equal(check.sandbox?.ok, false);
  assert.match(check.sandbox!.error!, /hybrid mode/);
  assert.match(check.problems[0].fix!, /runc/);
});

Deno.test("a missing image is reported with the build command and no sandbox is tried", async () => {
  const runtime = fakeRuntime("docker", { image: false });
  const check = await checkRuntime(runtime, options);
  assert.equal(check.status, "fail");
  assert.equal(check.sandbox, undefined);
  assert.equal(runtime.started.length, 0);
  assert.equal(check.problems[0].fix, "Build it: codemode image build --runtime docker");
});

Deno.test("a runtime that is not installed is information, not a failure", async () => {
  const runtime = fakeRuntime("nerdctl", {
    detection: { available: false, version: undefined, problems: [{ message: "nerdctl is not installed" }] },
  });
  const check = await checkRuntime(runtime, options);
  assert.equal(check.status, "info");
  assert.equal(check.installed, false);
  assert.equal(runtime.started.length, 0);
});

Deno.test("detection warnings survive a working sandbox as warnings", async () => {
  const runtime = fakeRuntime("podman", {
    detection: {
      rootless: true,
      problems: [{ message: "Rootless podman on cgroup v1 cannot apply memory limits" }],
    },
  });
  const check = await checkRuntime(runtime, options);
  assert.equal(check.status, "warn");
  assert.equal(check.sandbox?.ok, true);
  assert.equal(check.problems.length, 1);
});

Deno.test("with auto, a broken runtime is only a warning when another one works", () => {
  const base = { installed: true, problems: [] };
  const runtimes = [
    { ...base, name: "podman", status: "fail" as const },
    { ...base, name: "docker", status: "ok" as const },
  ];
  const chosen = chooseRuntime("auto", runtimes);
  assert.equal(chosen.runtime, "docker");
  assert.equal(chosen.finding, undefined);
  assert.equal(runtimes[0].status, "warn");
  assert.equal(
    chosen.reason,
    "auto takes the first that works of podman, docker: podman does not work (see below)",
  );
});

Deno.test("doctor says why it would use a runtime: what auto skipped, or the setting that names it", () => {
  const missing = (name: string): RuntimeCheck => ({ name, status: "info", installed: false, problems: [] });
  const runtimes: RuntimeCheck[] = [
    missing("podman"),
    missing("docker"),
    missing("nerdctl"),
    { name: "pyodide", status: "ok", installed: true, problems: [] },
  ];
  const auto = chooseRuntime("auto", runtimes);
  assert.equal(auto.runtime, "pyodide");
  assert.equal(
    auto.reason,
    "auto takes the first that works of podman, docker, nerdctl, pyodide: podman is not installed; " +
      "docker is not installed; nerdctl is not installed",
  );
  const named = chooseRuntime("pyodide", runtimes, "/home/me/.config/codemode/config.yaml");
  assert.equal(
    named.reason,
    '/home/me/.config/codemode/config.yaml names it ("pyodide"); no other runtime is tried',
  );
  const first = chooseRuntime("auto", [{ name: "podman", status: "ok", installed: true, problems: [] }]);
  assert.equal(first.reason, "auto takes the first that works of podman, and it is the first");
});

Deno.test("a named runtime that does not work is fatal and the working alternative is suggested", () => {
  const base = { installed: true, problems: [] };
  const runtimes: RuntimeCheck[] = [
    { ...base, name: "podman", status: "fail" },
    { ...base, name: "docker", status: "ok" },
    { ...base, name: "nerdctl", status: "fail" },
  ];
  const chosen = chooseRuntime("podman", runtimes);
  assert.deepEqual(runtimes.map((r) => r.status), ["fail", "ok", "warn"]);
  assert.equal(chosen.runtime, undefined);
  assert.equal(chosen.finding?.status, "fail");
  assert.match(chosen.finding!.fix!, /CODEMODE_RUNTIME=docker/);
  const none = chooseRuntime("auto", [{ name: "podman", status: "info", installed: false, problems: [] }]);
  assert.equal(none.finding?.status, "fail");
  assert.match(none.finding!.fix!, /apt-get install podman/);
});

Deno.test("settings show their value and source, and a bad one falls back to its default as a failure", () => {
  const { settings, checks } = checkSettings({
    HOME: "/home/someone",
    CODEMODE_TIMEOUT: "soon",
    MCP_BRIDGE_MEMORY: "1g",
    CODEMODE_PIDS: "64",
  });
  const by = new Map(checks.map((c) => [c.key, c]));
  assert.equal(settings.timeout, 30);
  assert.equal(by.get("timeout")!.status, "fail");
  assert.match(by.get("timeout")!.problem!.message, /CODEMODE_TIMEOUT="soon"/);
  assert.deepEqual([by.get("memory")!.value, by.get("memory")!.source], ["1g", "MCP_BRIDGE_MEMORY"]);
  assert.deepEqual([by.get("pids")!.value, by.get("pids")!.source], [64, "CODEMODE_PIDS"]);
  assert.deepEqual([by.get("runtime")!.value, by.get("runtime")!.source], ["auto", "default"]);
  assert.equal(by.get("stateDir")!.value, "/home/someone/.local/state/codemode");
});

Deno.test("timeout settings that contradict each other are reported and the result stays consistent", () => {
  const { settings, checks } = checkSettings({
    HOME: "/h",
    CODEMODE_TIMEOUT: "60",
    CODEMODE_MAX_TIMEOUT: "10",
  });
  assert.ok(settings.timeout <= settings.maxTimeout);
  assert.ok(checks.some((c) => (c.key === "timeout" || c.key === "maxTimeout") && c.status === "fail"));
  // Valid one by one (100 <= 120 default max, 30 default <= 50), invalid together: both fall back.
  const both = checkSettings({ HOME: "/h", CODEMODE_TIMEOUT: "100", CODEMODE_MAX_TIMEOUT: "50" });
  assert.deepEqual([both.settings.timeout, both.settings.maxTimeout], [30, 120]);
  assert.equal(both.checks.find((c) => c.key === "timeout")!.status, "fail");
});

Deno.test("the state directory is checked for existence and writability", async () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-doctor-"));
  const present = await checkStateDir(dir);
  assert.deepEqual([present.status, present.exists, present.writable], ["ok", true, true]);
  const later = await checkStateDir(join(dir, "a", "b"));
  assert.deepEqual([later.status, later.exists, later.writable], ["ok", false, true]);
  writeFileSync(join(dir, "file"), "");
  const underFile = await checkStateDir(join(dir, "file", "state"));
  assert.deepEqual([underFile.status, underFile.writable], ["warn", false]);
  const isFile = await checkStateDir(join(dir, "file"));
  assert.match(isFile.problem!.message, /not a directory/);
});

Deno.test("config files list their servers and diagnostics; an error makes the file fail", () => {
  const configs = checkConfigs({
    servers: [spec("memory", "/h/.claude.json"), spec("fs", "/h/.cursor/mcp.json")],
    skipped: [{
      name: "self",
      source: spec("self", "/h/.claude.json").source,
      reason: "would launch codemode itself",
    }],
    diagnostics: [
      { severity: "warning", file: "/h/.cursor/mcp.json", server: "fs", message: "unknown key" },
      { severity: "error", file: "/h/.codeium/windsurf/mcp_config.json", message: "not valid JSON" },
      { severity: "error", file: "vscode", message: "plugin crashed" },
    ],
    files: [
      { plugin: "claude", path: "/h/.claude.json", servers: 2 },
      { plugin: "cursor", path: "/h/.cursor/mcp.json", servers: 1 },
      { plugin: "windsurf", path: "/h/.codeium/windsurf/mcp_config.json", servers: 0 },
    ],
  });
  assert.deepEqual(configs.map((c) => [c.path, c.status, c.servers]), [
    ["/h/.claude.json", "ok", ["memory", "self"]],
    ["/h/.cursor/mcp.json", "warn", ["fs"]],
    ["/h/.codeium/windsurf/mcp_config.json", "fail", []],
    ["vscode", "fail", []],
  ]);
});

Deno.test("servers are started and listed with their tool count, a failing one says where it is configured", async () => {
  const discovery: DiscoveryFacts = {
    ...noDiscovery,
    servers: [
      spec("good", "/h/.claude.json"),
      spec("bad", "/h/.claude.json"),
      spec("slow", "/h/.claude.json"),
    ],
  };
  const listTools = (name: string) =>
    name === "good"
      ? Promise.resolve([{}, {}, {}])
      : name === "bad"
      ? Promise.reject(new Error("spawn node ENOENT"))
      : new Promise<unknown[]>(() => {});
  const checks = await checkServers(discovery, listTools, 200);
  const by = new Map(checks.map((c) => [c.name, c]));
  assert.deepEqual([by.get("good")!.status, by.get("good")!.tools], ["ok", 3]);
  assert.equal(by.get("bad")!.status, "fail");
  assert.match(by.get("bad")!.problem!.message, /ENOENT/);
  assert.match(by.get("bad")!.problem!.fix!, /"node bad\.js" in \/h\/\.claude\.json \(mcpServers\.bad\)/);
  assert.match(by.get("slow")!.problem!.message, /within 0\.2s/);
  const quick = await checkServers(discovery, undefined);
  assert.ok(quick.every((c) => c.status === "info" && c.tools === undefined));
});

Deno.test("the report is ok with warnings only and not ok when a config file is broken", async () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-doctor-"));
  const input = {
    version: "9.9.9",
    env: { HOME: dir, CODEMODE_STATE_DIR: dir },
    runtimes: [fakeRuntime("podman", { image: false }), fakeRuntime("docker")],
    discovery: noDiscovery,
    sandbox: { command: options.command, bootstrap },
  };
  const healthy = await runDoctor(input);
  assert.equal(healthy.ok, true);
  assert.equal(healthy.runtime, "docker");
  assert.deepEqual(healthy.findings.map((f) => [f.status, f.subject]), [["warn", "runtime podman"]]);
  const broken = await runDoctor({
    ...input,
    discovery: {
      ...noDiscovery,
      diagnostics: [{ severity: "error", file: "/h/x.json", message: "not JSON" }],
    },
  });
  assert.equal(broken.ok, false);
  assert.ok(broken.findings.some((f) => f.status === "fail" && f.subject === "config /h/x.json"));
  const none = await runDoctor({ ...input, runtimes: [fakeRuntime("podman", { image: false })] });
  assert.equal(none.ok, false);
  assert.equal(none.findings[0].subject, "runtime");
});

Deno.test("doctor shows the skill directories with their skills, and each skill that failed to load", async () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-doctor-"));
  const roots = skillRoots({ cwd: join(dir, "p"), env: { HOME: dir } });
  mkdirSync(join(roots[1].path, "good"), { recursive: true });
  writeFileSync(join(roots[1].path, "good", "SKILL.md"), "---\nname: good\ndescription: Works\n---\n");
  mkdirSync(join(roots[1].path, "bad"));
  writeFileSync(join(roots[1].path, "bad", "SKILL.md"), "no frontmatter\n");
  const store = await SkillStore.open({ roots, mode: "ro" });
  const report = await runDoctor({
    version: "9.9.9",
    env: { HOME: dir, CODEMODE_STATE_DIR: dir, CODEMODE_SKILLS: "ro" },
    runtimes: [fakeRuntime("docker")],
    discovery: noDiscovery,
    sandbox: { command: options.command, bootstrap },
    skills: checkSkills("ro", store),
  });
  assert.deepEqual(report.skills!.dirs.map((d) => [d.kind, d.skills]), [["project", 0], ["user", 1]]);
  const finding = report.findings.find((f) =>
    f.subject === `skill ${join(roots[1].path, "bad", "SKILL.md")}`
  );
  assert.equal(finding?.status, "warn");
  assert.equal(report.ok, true, "a bad skill is a warning: the others still load");
  assert.ok(report.settings.some((s) => s.env === "CODEMODE_SKILLS" && s.value === "ro"));
  const text = renderReport(report, colors({ isTTY: false }));
  assert.match(text, /Skills \(CODEMODE_SKILLS=ro\)/);
  assert.match(text, /Read-only: skills load, but sandbox code cannot save them/);
  assert.equal(checkSkills("off", undefined).dirs.length, 0);
});
