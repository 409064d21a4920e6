import assert from "node:assert/strict";
import { Policy, policyOf, type Verdict } from "../../core/config/policy.ts";
import { globMatches, globToRegExp, toolGlobMatches } from "../../core/config/globs.ts";
import { loadSettings, SettingsError } from "../../core/config/settings.ts";
import { parseConfigFile } from "../../core/config/file.ts";

const refused = (v: Verdict): string => {
  assert.equal(v.ok, false, "expected a refusal");
  return (v as { reason: string }).reason;
};

Deno.test("globToRegExp() knows * and ? and takes every other character literally", () => {
  assert.ok(globToRegExp("get-*").test("get-sum"));
  assert.ok(globToRegExp("get-*").test("get-"));
  assert.ok(!globToRegExp("get-*").test("xget-sum"));
  assert.ok(globToRegExp("fil?").test("file"));
  assert.ok(!globToRegExp("fil?").test("files"));
  assert.ok(globToRegExp("a.b").test("a.b"));
  assert.ok(!globToRegExp("a.b").test("axb"), "a dot is not a wildcard");
  assert.ok(globToRegExp("x(1)+[y]$").test("x(1)+[y]$"));
  assert.ok(globToRegExp("*").test(""));
});

Deno.test("globMatches() matches a name or its Python alias", () => {
  assert.ok(globMatches("get_sum", "get-sum"));
  assert.ok(globMatches("get-sum", "get-sum"));
  assert.ok(globMatches("my_server", "my-server"));
  assert.ok(!globMatches("get_sum", "get-sums"));
  assert.ok(!globMatches("Echo", "echo"), "matching is case-sensitive");
});

Deno.test("toolGlobMatches() reads server/tool, and a bare pattern as a tool of any server", () => {
  assert.ok(toolGlobMatches("everything/get-*", "everything", "get-sum"));
  assert.ok(!toolGlobMatches("everything/get-*", "memory", "get-sum"));
  assert.ok(toolGlobMatches("echo", "everything", "echo"));
  assert.ok(toolGlobMatches("echo", "other", "echo"));
  assert.ok(toolGlobMatches("*/echo", "other", "echo"));
  assert.ok(toolGlobMatches("my_server/get_sum", "my-server", "get-sum"));
  assert.ok(!toolGlobMatches("every*", "everything", "echo"), "a bare pattern names tools, not servers");
  assert.ok(toolGlobMatches("fs/dir/*", "fs", "dir/list"), "only the first / splits server from tool");
});

Deno.test("an empty policy refuses nothing and calls itself open", () => {
  const policy = new Policy();
  assert.equal(policy.open, true);
  assert.ok(policy.allowsServer("anything").ok);
  assert.ok(policy.allowsTool("anything", "rm-rf", {}).ok);
  assert.ok(policy.allowsCall(1_000_000).ok);
});

Deno.test("a deny rule beats an allow rule, and the refusal names the rule and its pattern", () => {
  const policy = new Policy(
    { allowServers: ["*"], denyServers: ["git*"] },
    { denyServers: "CODEMODE_DENY_SERVERS" },
  );
  assert.equal(policy.open, false);
  assert.ok(policy.allowsServer("memory").ok);
  assert.equal(
    refused(policy.allowsServer("github")),
    'Server "github" is denied by policy (CODEMODE_DENY_SERVERS has "git*")',
  );
});

Deno.test("an allow list admits only what it matches and says what it allows", () => {
  const policy = new Policy({ allowServers: ["everything", "mem*"] }, {
    allowServers: "/home/u/.config/codemode/config.yaml",
  });
  assert.ok(policy.allowsServer("memory").ok);
  assert.equal(
    refused(policy.allowsServer("github")),
    'Server "github" is not allowed by policy (allowServers in /home/u/.config/codemode/config.yaml allows only "everything", "mem*")',
  );
});

Deno.test("tool rules: deny beats allow, a refused server refuses its tools, read-only needs readOnlyHint", () => {
  const policy = new Policy({
    denyServers: ["secret"],
    allowTools: ["everything/*", "memory/read_graph", "memory/create_*"],
    denyTools: ["*/get-env"],
  });
  assert.ok(policy.allowsTool("everything", "echo").ok);
  assert.match(
    refused(policy.allowsTool("everything", "get-env")),
    /Tool "everything\/get-env" is denied by policy \(CODEMODE_DENY_TOOLS has "\*\/get-env"\)/,
  );
  assert.match(
    refused(policy.allowsTool("memory", "delete_entities")),
    /is not allowed by policy \(CODEMODE_ALLOW_TOOLS allows only/,
  );
  assert.match(refused(policy.allowsTool("secret", "anything")), /Server "secret" is denied/);

  const readOnly = new Policy({ readOnly: true }, { readOnly: "CODEMODE_READ_ONLY" });
  assert.ok(readOnly.allowsTool("memory", "read_graph", { readOnlyHint: true }).ok);
  assert.match(
    refused(readOnly.allowsTool("memory", "create_entities", { readOnlyHint: false })),
    /read-only mode \(CODEMODE_READ_ONLY\) allows only tools annotated readOnlyHint/,
  );
  assert.equal(readOnly.allowsTool("memory", "unannotated").ok, false, "no annotation is not read-only");
  assert.equal(readOnly.allowsTool("memory", "truthy", { readOnlyHint: "yes" }).ok, false);
});

Deno.test("the tool-call limit allows exactly maxToolCalls calls", () => {
  const policy = new Policy({ maxToolCalls: 3 });
  assert.ok(policy.allowsCall(0).ok);
  assert.ok(policy.allowsCall(2).ok);
  assert.match(
    refused(policy.allowsCall(3)),
    /already made its 3 allowed tool calls \(CODEMODE_MAX_TOOL_CALLS\)/,
  );
});

Deno.test("policyOf() takes the rules from settings and the environment beats the config file", () => {
  const file = parseConfigFile(
    "/proj/codemode.yaml",
    "denyServers: [github, 'slack*']\nreadOnly: true\nmax_tool_calls: 10\ndeny-tools: '*/delete_*'\n",
  );
  const settings = loadSettings(
    { HOME: "/h", CODEMODE_DENY_SERVERS: "memory", CODEMODE_MAX_TOOL_CALLS: "2" },
    file,
  );
  assert.deepEqual(settings.denyServers, ["memory"]);
  assert.equal(settings.maxToolCalls, 2);
  assert.equal(settings.readOnly, true);
  assert.deepEqual(settings.denyTools, ["*/delete_*"]);
  assert.deepEqual(settings.sources?.denyServers, "CODEMODE_DENY_SERVERS");
  assert.deepEqual(settings.sources?.readOnly, "/proj/codemode.yaml");
  const policy = policyOf(settings);
  assert.ok(policy.allowsServer("github").ok, "the variable replaced the file's deny list");
  assert.match(refused(policy.allowsServer("memory")), /CODEMODE_DENY_SERVERS has "memory"/);
  assert.match(
    refused(policy.allowsTool("x", "delete_all", { readOnlyHint: true })),
    /denyTools in \/proj\/codemode\.yaml has/,
  );
  assert.match(refused(policy.allowsCall(2)), /its 2 allowed tool calls \(CODEMODE_MAX_TOOL_CALLS\)/);
});

Deno.test("glob lists are comma-separated in variables and lists in files; empty items are dropped", () => {
  const fromEnv = loadSettings({ HOME: "/h", CODEMODE_ALLOW_TOOLS: " everything/echo, ,memory/* " });
  assert.deepEqual(fromEnv.allowTools, ["everything/echo", "memory/*"]);
  const fromFile = loadSettings(
    { HOME: "/h" },
    parseConfigFile("/p/codemode.json", '{"allowServers": ["a", "b*"]}'),
  );
  assert.deepEqual(fromFile.allowServers, ["a", "b*"]);
  const defaults = loadSettings({ HOME: "/h" });
  assert.deepEqual([defaults.allowServers, defaults.denyServers, defaults.readOnly], [
    ["*"],
    undefined,
    false,
  ]);
  assert.equal(policyOf(defaults).open, true);
});

Deno.test("a malformed pattern or value is an error naming the variable or the file and key", () => {
  assert.throws(
    () => loadSettings({ HOME: "/h", CODEMODE_DENY_SERVERS: "ok,every/thing" }),
    (e: Error) =>
      e instanceof SettingsError &&
      e.message ===
        'Invalid CODEMODE_DENY_SERVERS="ok,every/thing": server patterns have no "/" (got "every/thing")',
  );
  assert.throws(
    () => loadSettings({ HOME: "/h", CODEMODE_DENY_TOOLS: "/echo" }),
    /has an empty server part; write "\*\/echo"/,
  );
  const file = (text: string) => parseConfigFile("/p/codemode.yaml", text);
  assert.throws(
    () => loadSettings({ HOME: "/h" }, file("maxToolCalls: lots\n")),
    (e: Error) => e.message === 'Invalid maxToolCalls="lots" in "/p/codemode.yaml": expected a whole number',
  );
  assert.throws(
    () => loadSettings({ HOME: "/h" }, file("readOnly: maybe\n")),
    /Invalid readOnly="maybe" in "\/p\/codemode.yaml": expected one of .*true, false/,
  );
  assert.throws(
    () => loadSettings({ HOME: "/h" }, file("denyServer: [x]\n")),
    /Unknown key "denyServer" in "\/p\/codemode.yaml": expected one of .*denyServers/,
  );
  assert.throws(
    () => loadSettings({ HOME: "/h" }, file("denyTools:\n  a: b\n")),
    /Invalid denyTools in "\/p\/codemode.yaml": expected a value or a list of values, not a mapping/,
  );
  assert.throws(
    () => loadSettings({ HOME: "/h" }, file("config: other.yaml\n")),
    /only the CODEMODE_CONFIG variable can name the config file/,
  );
});

Deno.test("a bad value in the file is no error when a variable overrides it", () => {
  const s = loadSettings(
    { HOME: "/h", CODEMODE_MAX_TOOL_CALLS: "4" },
    parseConfigFile("/p/codemode.yaml", "maxToolCalls: lots\n"),
  );
  assert.equal(s.maxToolCalls, 4);
});
