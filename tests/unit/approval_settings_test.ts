/**
 * The approval settings where users meet them: parsed from the environment and the config file with
 * their defaults, shown by doctor with where each came from, and in the capabilities text.
 */
import assert from "node:assert/strict";
import pc from "picocolors";
import { parseConfigFile } from "../../core/config/file.ts";
import { loadSettings, resolveSettings, SettingsError } from "../../core/config/settings.ts";
import { policyOf } from "../../core/config/policy.ts";
import { runDoctor } from "../../core/doctor/checks.ts";
import { capabilityText } from "../../core/serve/capabilities.ts";
import { renderReport } from "../../cli/doctor.ts";

const FILE = "/proj/codemode.yaml";

Deno.test("the approval settings default to off, 300s and deny, and read the environment and the file", () => {
  const defaults = loadSettings({ HOME: "/h" });
  assert.deepEqual(
    [defaults.confirm, defaults.confirmDestructive, defaults.confirmTimeout, defaults.confirmFallback],
    [undefined, false, 300, "deny"],
  );
  assert.equal(policyOf(defaults).asksApproval, false);
  const file = parseConfigFile(FILE, 'confirm: ["github/create_*", delete_*]\nconfirm_destructive: true\n');
  const { settings, problems } = resolveSettings(
    { HOME: "/h", CODEMODE_CONFIRM_TIMEOUT: "2m", CODEMODE_CONFIRM_FALLBACK: "Allow" },
    file,
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(settings.confirm, ["github/create_*", "delete_*"]);
  assert.equal(settings.confirmDestructive, true);
  assert.equal(settings.confirmTimeout, 120);
  assert.equal(settings.confirmFallback, "allow");
  const policy = policyOf(settings);
  assert.equal(policy.approvalReason("github", "create_issue"), `confirm in ${FILE} has "github/create_*"`);
  assert.match(policy.approvalReason("x", "anything") ?? "", new RegExp(`confirmDestructive in ${FILE}`));
  assert.equal(
    policyOf(loadSettings({ HOME: "/h", CODEMODE_CONFIRM_TOOLS: "fs/write_*" })).approvalReason(
      "fs",
      "write_file",
    ),
    'CODEMODE_CONFIRM_TOOLS has "fs/write_*"',
  );
});

Deno.test("a bad approval setting is one error naming the variable and what it accepts", () => {
  assert.throws(
    () => loadSettings({ CODEMODE_CONFIRM_FALLBACK: "ask" }),
    (e: Error) =>
      e instanceof SettingsError &&
      /CODEMODE_CONFIRM_FALLBACK="ask": expected one of deny, allow/.test(e.message),
  );
  assert.throws(() => loadSettings({ CODEMODE_CONFIRM_TIMEOUT: "soon" }), /CODEMODE_CONFIRM_TIMEOUT="soon"/);
  assert.throws(() => loadSettings({ CODEMODE_CONFIRM_TOOLS: "/write_file" }), /empty server part/);
  assert.throws(
    () => loadSettings({ CODEMODE_CONFIRM_DESTRUCTIVE: "maybe" }),
    /CODEMODE_CONFIRM_DESTRUCTIVE/,
  );
});

Deno.test("doctor shows the approval rules with where each came from", async () => {
  const report = await runDoctor({
    version: "0.0.0",
    env: { HOME: "/h", CODEMODE_STATE_DIR: "/tmp", CODEMODE_CONFIRM_DESTRUCTIVE: "1" },
    runtimes: [],
    discovery: { servers: [], skipped: [], diagnostics: [], files: [] },
    listTools: () => Promise.resolve([]),
    sandbox: { command: ["python3"], bootstrap: () => ({ type: "shutdown" }) },
    configFile: parseConfigFile(FILE, "confirm: [fs/write_file]\nconfirmTimeout: 90s\n"),
    configSearched: [FILE],
  });
  const rule = (key: string) => report.policy.rules.find((r) => r.key === key);
  assert.deepEqual([rule("confirm")?.value, rule("confirm")?.source], [["fs/write_file"], FILE]);
  assert.deepEqual([rule("confirmDestructive")?.value, rule("confirmDestructive")?.source], [
    true,
    "CODEMODE_CONFIRM_DESTRUCTIVE",
  ]);
  assert.deepEqual([rule("confirmTimeout")?.value, rule("confirmTimeout")?.source], [90, FILE]);
  assert.deepEqual([rule("confirmFallback")?.value, rule("confirmFallback")?.source], ["deny", "default"]);
  const text = renderReport(report, pc.createColors(false));
  assert.match(text, /confirm +│ fs\/write_file +│ \/proj\/codemode\.yaml/);
  assert.match(text, /confirmDestructive +│ true +│ CODEMODE_CONFIRM_DESTRUCTIVE/);
  assert.match(text, /confirmTimeout +│ 90s +│ \/proj\/codemode\.yaml/);
  assert.match(text, /confirmFallback +│ deny +│ default/);
});

Deno.test("the capabilities text tells a model which calls wait for the user, and how to plan first", () => {
  const plain = capabilityText([], undefined, policyOf(loadSettings({ HOME: "/h" })));
  assert.match(plain, /runtime\.dry_run\(\)/, "dry runs are always there");
  assert.doesNotMatch(plain, /## Approvals/);
  const asking = capabilityText(
    [],
    undefined,
    policyOf(
      loadSettings({ HOME: "/h", CODEMODE_CONFIRM_TOOLS: "fs/write_*", CODEMODE_CONFIRM_DESTRUCTIVE: "1" }),
    ),
  );
  assert.match(asking, /## Approvals\n- Some calls wait until the user approves them/);
  assert.match(asking, /declined by the user/);
  assert.match(asking, /- Asked for: `fs\/write_\*`\./);
  assert.match(asking, /- Asked for every tool not annotated `readOnlyHint` or `destructiveHint: false`\./);
});
