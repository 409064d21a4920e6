import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  configCandidates,
  ConfigFileError,
  parseConfigFile,
  readConfigFile,
} from "../../core/config/file.ts";
import { loadSettings, SettingsError } from "../../core/config/settings.ts";

/** A project directory and a HOME with a user config dir, both empty. */
function dirs(): { cwd: string; home: string; user: string } {
  const root = mkdtempSync(join(tmpdir(), "codemode-config-"));
  const cwd = join(root, "project");
  const home = join(root, "home");
  const user = join(home, ".config", "codemode");
  mkdirSync(cwd);
  mkdirSync(user, { recursive: true });
  return { cwd, home, user };
}

Deno.test("configCandidates() looks in the working directory first, then the user's config directory", () => {
  assert.deepEqual(configCandidates({ HOME: "/h" }, "/p"), [
    "/p/codemode.yaml",
    "/p/codemode.yml",
    "/p/codemode.json",
    "/h/.config/codemode/config.yaml",
    "/h/.config/codemode/config.yml",
    "/h/.config/codemode/config.json",
  ]);
  assert.equal(configCandidates({ HOME: "/h", XDG_CONFIG_HOME: "/x" }, "/p")[3], "/x/codemode/config.yaml");
  assert.deepEqual(configCandidates({ HOME: "/h", CODEMODE_CONFIG: "conf/my.yaml" }, "/p"), [
    "/p/conf/my.yaml",
  ]);
});

Deno.test("readConfigFile() finds nothing when there is no file", () => {
  const { cwd, home } = dirs();
  assert.equal(readConfigFile({ HOME: home }, cwd), undefined);
});

Deno.test("the project file wins over the user file, which is then reported as ignored", () => {
  const { cwd, home, user } = dirs();
  writeFileSync(join(user, "config.yaml"), "readOnly: true\n");
  const userOnly = readConfigFile({ HOME: home }, cwd)!;
  assert.deepEqual(userOnly, { path: join(user, "config.yaml"), values: { readOnly: true } });
  writeFileSync(join(cwd, "codemode.json"), '{"maxRuns": 2}');
  const both = readConfigFile({ HOME: home }, cwd)!;
  assert.equal(both.path, join(cwd, "codemode.json"));
  assert.deepEqual(both.values, { maxRuns: 2 });
  assert.deepEqual(both.ignored, [join(user, "config.yaml")]);
});

Deno.test("CODEMODE_CONFIG names the only file read, and a missing one is an error", () => {
  const { cwd, home } = dirs();
  writeFileSync(join(cwd, "codemode.yaml"), "readOnly: true\n");
  writeFileSync(join(cwd, "strict.yml"), "denyServers: [github]\n");
  const named = readConfigFile({ HOME: home, CODEMODE_CONFIG: "strict.yml" }, cwd)!;
  assert.equal(named.path, join(cwd, "strict.yml"));
  assert.equal(named.ignored, undefined);
  assert.throws(
    () => readConfigFile({ HOME: home, CODEMODE_CONFIG: "gone.yaml" }, cwd),
    (e: Error) =>
      e instanceof ConfigFileError &&
      e.message ===
        `Cannot read config "${
          join(cwd, "gone.yaml")
        }" (named by CODEMODE_CONFIG): no such file; fix or unset CODEMODE_CONFIG`,
  );
});

Deno.test("parseConfigFile() reads YAML and JSON; an empty file holds no settings", () => {
  assert.deepEqual(parseConfigFile("/p/codemode.yaml", "# only a comment\n").values, {});
  assert.deepEqual(parseConfigFile("/p/codemode.yaml", "").values, {});
  assert.deepEqual(parseConfigFile("/p/codemode.yml", "denyTools:\n  - '*/delete_*'\n").values, {
    denyTools: ["*/delete_*"],
  });
  assert.deepEqual(parseConfigFile("/p/codemode.json", '{"timeout": "10s"}').values, { timeout: "10s" });
});

Deno.test("a malformed file is an error naming the file and what is wrong", () => {
  assert.throws(
    () => parseConfigFile("/p/codemode.yaml", "readOnly: true\nreadOnly: false\n"),
    (e: Error) =>
      e instanceof ConfigFileError && e.path === "/p/codemode.yaml" &&
      /^Cannot parse config "\/p\/codemode.yaml": Map keys must be unique at line 2, column 1$/.test(
        e.message,
      ),
  );
  assert.throws(
    () => parseConfigFile("/p/codemode.json", '{"maxRuns": 2,}'),
    /^ConfigFileError: Cannot parse config "\/p\/codemode.json": /,
  );
  assert.throws(
    () => parseConfigFile("/p/codemode.yaml", "- readOnly\n"),
    /Cannot use config "\/p\/codemode.yaml": expected a mapping of settings \(key: value\) at the top level/,
  );
});

Deno.test("loadSettings() without arguments reads ./codemode.yaml under the environment", () => {
  const { cwd, home } = dirs();
  writeFileSync(join(cwd, "codemode.yaml"), "timeout: 5s\nmaxToolCalls: 7\nruntime: docker\n");
  const saved = { cwd: process.cwd(), env: { ...process.env } };
  try {
    process.chdir(cwd);
    for (const key of Object.keys(process.env)) if (key.startsWith("CODEMODE_")) delete process.env[key];
    process.env.HOME = home;
    process.env.CODEMODE_RUNTIME = "podman";
    const s = loadSettings();
    assert.deepEqual([s.timeout, s.maxToolCalls, s.runtime], [5, 7, "podman"]);
    assert.deepEqual(s.sources, {
      timeout: join(cwd, "codemode.yaml"),
      maxToolCalls: join(cwd, "codemode.yaml"),
      runtime: "CODEMODE_RUNTIME",
    });
    writeFileSync(join(cwd, "codemode.yaml"), "timeout: [5\n");
    assert.throws(
      () => loadSettings(),
      (e: Error) => e instanceof SettingsError && /codemode.yaml/.test(e.message),
    );
  } finally {
    process.chdir(saved.cwd);
    for (const key of Object.keys(process.env)) if (!(key in saved.env)) delete process.env[key];
    Object.assign(process.env, saved.env);
  }
});
