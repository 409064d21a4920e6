import assert from "node:assert/strict";
import { loadSettings, resolveSettings, SettingsError } from "../../core/config/settings.ts";

Deno.test("loadSettings() gives the documented defaults for an empty environment", () => {
  const s = loadSettings({ HOME: "/home/u" });
  assert.equal(s.runtime, "auto");
  assert.equal(s.image, "codemode-sandbox:latest");
  assert.equal(s.output, "compact");
  assert.equal(s.timeout, 30);
  assert.equal(s.maxTimeout, 120);
  assert.equal(s.memory, "512m");
  assert.equal(s.pids, 128);
  assert.equal(s.cpus, undefined);
  assert.equal(s.idleTimeout, 300);
  assert.equal(s.maxOutput, 1024 * 1024);
  assert.equal(s.stateDir, "/home/u/.local/state/codemode");
  assert.equal(s.allowSelf, false);
});

Deno.test("loadSettings() accepts the bridge's MCP_BRIDGE_* aliases", () => {
  const s = loadSettings({
    MCP_BRIDGE_RUNTIME: "docker",
    MCP_BRIDGE_OUTPUT_MODE: "TOON",
    MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT: "2m",
    MCP_BRIDGE_MEMORY: "1G",
    MCP_BRIDGE_STATE_DIR: "/state",
    MCP_BRIDGE_ALLOW_SELF_SERVER: "1",
  });
  assert.equal(s.runtime, "docker");
  assert.equal(s.output, "toon");
  assert.equal(s.idleTimeout, 120);
  assert.equal(s.memory, "1g");
  assert.equal(s.stateDir, "/state");
  assert.equal(s.allowSelf, true);
});

Deno.test("loadSettings() prefers CODEMODE_* over the bridge alias", () => {
  const s = loadSettings({ CODEMODE_TIMEOUT: "5", MCP_BRIDGE_TIMEOUT: "50" });
  assert.equal(s.timeout, 5);
});

Deno.test("loadSettings() parses durations and sizes in their usual units", () => {
  const s = loadSettings({ CODEMODE_TIMEOUT: "1500ms", CODEMODE_MAX_OUTPUT: "512k", CODEMODE_CPUS: "1.5" });
  assert.equal(s.timeout, 1.5);
  assert.equal(s.maxOutput, 512 * 1024);
  assert.equal(s.cpus, "1.5");
});

Deno.test("loadSettings() names the variable and the accepted values in its error", () => {
  assert.throws(
    () => loadSettings({ CODEMODE_RUNTIME: "lxc" }),
    (e: Error) =>
      e instanceof SettingsError &&
      e.message === 'Invalid CODEMODE_RUNTIME="lxc": expected one of auto, podman, docker, nerdctl, pyodide',
  );
  assert.throws(
    () => loadSettings({ MCP_BRIDGE_PIDS: "lots" }),
    /Invalid MCP_BRIDGE_PIDS="lots": expected a whole/,
  );
  assert.throws(() => loadSettings({ CODEMODE_MEMORY: "big" }), /Invalid CODEMODE_MEMORY="big"/);
  assert.throws(() => loadSettings({ CODEMODE_TIMEOUT: "0" }), /above zero/);
});

Deno.test("loadSettings() refuses a default timeout above the maximum", () => {
  assert.throws(() => loadSettings({ CODEMODE_TIMEOUT: "300" }), /exceeds CODEMODE_MAX_TIMEOUT/);
});

Deno.test("CODEMODE_SKILLS is rw by default and accepts ro and off", () => {
  assert.equal(loadSettings({ HOME: "/h" }).skills, "rw");
  assert.equal(loadSettings({ CODEMODE_SKILLS: "RO" }).skills, "ro");
  assert.equal(loadSettings({ CODEMODE_SKILLS: "off" }).skills, "off");
  assert.throws(
    () => loadSettings({ CODEMODE_SKILLS: "yes" }),
    /Invalid CODEMODE_SKILLS="yes": expected one of rw, ro, off/,
  );
  assert.deepEqual(loadSettings({ HOME: "/h" }).skillDirs, []);
});

Deno.test("the config file's skills mapping gives extra skill directories and the mode", () => {
  const file = {
    path: "/etc/cm/codemode.yaml",
    values: { skills: { dirs: ["~/.claude/skills", "team", "/abs"], mode: "ro" } },
  };
  const s = loadSettings({ HOME: "/home/u" }, file);
  assert.deepEqual(s.skillDirs, ["/home/u/.claude/skills", "/etc/cm/team", "/abs"]);
  assert.equal(s.skills, "ro");
  assert.equal(s.sources?.skills, "/etc/cm/codemode.yaml");
  assert.equal(
    loadSettings({ HOME: "/h", CODEMODE_SKILLS: "off" }, file).skills,
    "off",
    "a variable beats the file",
  );
  assert.equal(loadSettings({ HOME: "/h" }, { path: "/c.yaml", values: { skills: "off" } }).skills, "off");
});

Deno.test("a malformed skills mapping, or a mapping for another key, is refused with the key and the file", () => {
  const bad = (values: Record<string, unknown>) => () =>
    loadSettings({ HOME: "/h" }, { path: "/c.yaml", values });
  assert.throws(
    bad({ skills: { dirs: "~/x" } }),
    /Invalid skills in "\/c.yaml": expected \{mode: rw\|ro\|off, dirs: \[paths\]\} at dirs/,
  );
  assert.throws(bad({ skills: { folders: ["x"] } }), /Invalid skills in "\/c.yaml": expected \{mode/);
  assert.throws(bad({ skills: { mode: "maybe" } }), /Invalid skills in "\/c.yaml".* at mode/);
  assert.throws(
    bad({ maxRuns: { n: 1 } }),
    /Invalid maxRuns in "\/c.yaml": expected a value or a list of values, not a mapping/,
  );
});

Deno.test("CODEMODE_PREWARM takes stdio, on or off (and the usual booleans); stdio by default", () => {
  assert.equal(loadSettings({ HOME: "/h" }).prewarm, "stdio");
  for (
    const [raw, value] of [["on", "on"], ["TRUE", "on"], ["1", "on"], ["off", "off"], ["0", "off"], [
      "no",
      "off",
    ]]
  ) {
    assert.equal(loadSettings({ HOME: "/h", CODEMODE_PREWARM: raw }).prewarm, value, raw);
  }
  assert.throws(
    () => loadSettings({ HOME: "/h", CODEMODE_PREWARM: "always" }),
    /CODEMODE_PREWARM="always".*stdio, on, off/,
  );
});

Deno.test("CODEMODE_ISOLATION is container by default and gvisor on request, with runsc's platform and path", () => {
  const plain = loadSettings({ HOME: "/h" });
  assert.deepEqual([plain.isolation, plain.gvisorPlatform, plain.runsc], ["container", "ptrace", undefined]);
  const gvisor = loadSettings({
    CODEMODE_ISOLATION: "gVisor",
    CODEMODE_GVISOR_PLATFORM: "systrap",
    CODEMODE_RUNSC: "/opt/gvisor/runsc",
  });
  assert.deepEqual([gvisor.isolation, gvisor.gvisorPlatform, gvisor.runsc], [
    "gvisor",
    "systrap",
    "/opt/gvisor/runsc",
  ]);
  assert.throws(
    () => loadSettings({ CODEMODE_ISOLATION: "vm" }),
    /Invalid CODEMODE_ISOLATION="vm": expected one of container, gvisor/,
  );
  assert.throws(() => loadSettings({ CODEMODE_GVISOR_PLATFORM: "--debug" }), /expected a runsc platform/);
  // The config file's key, too.
  const file = { path: "/p/codemode.yaml", values: { isolation: "gvisor" } };
  assert.equal(loadSettings({ HOME: "/h" }, file).isolation, "gvisor");
});

Deno.test("gVisor with the pyodide runtime is refused: the runtime falls back, never the isolation", () => {
  assert.throws(
    () => loadSettings({ CODEMODE_ISOLATION: "gvisor", CODEMODE_RUNTIME: "pyodide" }),
    /Invalid CODEMODE_RUNTIME: the pyodide runtime cannot run under gVisor \(CODEMODE_ISOLATION=gvisor\)/,
  );
  const { settings, problems } = resolveSettings({
    CODEMODE_ISOLATION: "gvisor",
    CODEMODE_RUNTIME: "pyodide",
  });
  assert.equal(problems.length, 1);
  assert.deepEqual([settings.runtime, settings.isolation], ["auto", "gvisor"]);
});
