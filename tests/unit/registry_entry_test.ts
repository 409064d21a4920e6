/**
 * Registry entries as untrusted data: server.json validated with caps (oversized and malformed entries
 * left out with the reason), text made safe to show, and what an entry would run decided from checked
 * fields only: exact argv for npm and PyPI, https (or loopback) remotes, and every hostile shape refused
 * with a reason (shell metacharacters, a leading "-", an oci image, no version or a range, a variable that
 * changes the launcher, template variables, arguments that would be options).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { clean, parseEntry, type RegistryEntry } from "../../core/registry/server_json.ts";
import {
  argv,
  commandLine,
  type LaunchPlan,
  launchPlan,
  launchTools,
  type Unrunnable,
  valueProblem,
} from "../../core/registry/launch.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const testdata = (file: string): unknown =>
  JSON.parse(
    readFileSync(join(ROOT, "tests/testdata/registry", file), "utf8").replaceAll(
      "${PWNED_FILE}",
      "/tmp/pwned",
    )
      .replaceAll("${MCP_URL}", "https://mcp.example.com/mcp"),
  );
const entry = (server: unknown): RegistryEntry => {
  const parsed = parseEntry({ server });
  assert.ok("entry" in parsed, JSON.stringify(parsed));
  return parsed.entry;
};
const tools = { uvx: true };
const plan = (server: unknown): LaunchPlan => {
  const p = launchPlan(entry(server), tools);
  assert.ok("inputs" in p, JSON.stringify(p));
  return p;
};
const refused = (server: unknown): Unrunnable => {
  const p = launchPlan(entry(server), tools);
  assert.ok(!("inputs" in p), `expected a refusal, got ${JSON.stringify(p)}`);
  return p;
};
const npm = (pkg: Record<string, unknown>) => ({
  name: "io.example/x",
  description: "d",
  version: "1.0.0",
  packages: [{ registryType: "npm", identifier: "example-server", version: "1.2.3", ...pkg }],
});

Deno.test("the reference servers' real entries run as npx -y <package>@<exact version>", () => {
  const memory = plan(testdata("memory.json"));
  assert.deepEqual(memory.command, ["npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31"]);
  assert.equal(memory.target, "@modelcontextprotocol/server-memory");
  assert.deepEqual(argv(memory, {}), memory.command);

  // everything's first package is the stdio one; its fixed positional argument is passed as is.
  const everything = plan(testdata("everything.json"));
  assert.deepEqual(argv(everything, {}), [
    "npx",
    "-y",
    "@modelcontextprotocol/server-everything@2026.8.31",
    "stdio",
  ]);

  // filesystem leaves its directory open: the user fills it in; it is shown as <allowed_directory> until then.
  const filesystem = plan(testdata("filesystem.json"));
  assert.equal(
    commandLine(filesystem),
    "npx -y @modelcontextprotocol/server-filesystem@2026.8.31 '<allowed_directory>'",
  );
  assert.deepEqual(argv(filesystem, { allowed_directory: "/srv/data" }).slice(-1), ["/srv/data"]);
  const dir = filesystem.inputs[0];
  assert.equal(valueProblem(dir, "relative/path"), "it must be an absolute path");
  assert.equal(valueProblem(dir, "--root=/"), 'an argument value may not start with "-"');
  assert.equal(valueProblem(dir, "/a\u001b[2Jb"), "it contains control characters");
});

Deno.test("PyPI packages run with uvx pinned to the exact version, and only where uvx is installed", () => {
  const server = {
    name: "io.example/py",
    description: "d",
    version: "0.4.0",
    packages: [{ registryType: "pypi", identifier: "mcp-server-time", version: "0.6.2" }],
  };
  assert.deepEqual(plan(server).command, ["uvx", "--from", "mcp-server-time==0.6.2", "mcp-server-time"]);
  const none = launchPlan(entry(server), { uvx: false });
  assert.match((none as Unrunnable).why, /runs with uvx, which is not installed here/);
  assert.equal(typeof launchTools("/nonexistent").uvx, "boolean");
  assert.equal(launchTools("/nonexistent").uvx, false);
});

Deno.test("hostile testdata entries are refused with the reason, before anything could run", () => {
  assert.match(
    refused(testdata("hostile-shell.json")).why,
    /npm package "x; touch \/tmp\/pwned #" is not a valid/,
  );
  assert.match(
    refused(testdata("hostile-dash.json")).why,
    /npm package "--call=touch \/tmp\/pwned" is not a valid/,
  );
  const oci = refused(testdata("hostile-oci.json"));
  assert.equal(oci.type, "oci");
  assert.deepEqual(oci.shown, { image: "docker.io/example/server:1.0.0" });
  assert.match(oci.why, /oci image, and codemode does not run upstream servers in containers/);
  assert.match(
    refused(testdata("hostile-unpinned.json")).why,
    /has no version, and codemode runs only exact/,
  );
  assert.match(
    refused(testdata("hostile-node-options.json")).why,
    /"NODE_OPTIONS", which would change how its launcher/,
  );
  const noVersion = parseEntry({ server: testdata("hostile-no-version.json") });
  assert.ok("leftOut" in noVersion);
  assert.match(noVersion.leftOut.why, /not a valid server\.json \(version:/);
  assert.equal(noVersion.leftOut.name, "io.example.hostile/no-version-at-all");
});

Deno.test("versions must be exact, and launcher variables and option-like values are refused", () => {
  for (const version of ["^1.2.3", "~1.2.3", ">=1", "1.x", "latest", "1.2", "1.2.3 || 2", "1.2.3; rm"]) {
    assert.match(refused(npm({ version })).why, /not one exact version/, version);
  }
  assert.deepEqual(
    plan(npm({ version: "1.2.3-beta.1+build.5" })).command?.[2],
    "example-server@1.2.3-beta.1+build.5",
  );
  for (
    const name of [
      "npm_config_registry",
      "NPM_CONFIG_REGISTRY",
      "LD_PRELOAD",
      "PATH",
      "HTTPS_PROXY",
      "UV_INDEX_URL",
      "PYTHONPATH",
    ]
  ) {
    assert.match(
      refused(npm({ environmentVariables: [{ name }] })).why,
      /change how its launcher runs/,
      name,
    );
  }
  assert.match(refused(npm({ environmentVariables: [{ name: "A B" }] })).why, /invalid name/);
  assert.match(
    refused(npm({ packageArguments: [{ type: "positional", value: "--inspect=0.0.0.0:9229" }] })).why,
    /may not start with "-"/,
  );
  assert.match(
    refused(npm({ packageArguments: [{ type: "named", name: "--x;rm", value: "1" }] })).why,
    /not a plain --flag/,
  );
  assert.match(
    refused(
      npm({
        packageArguments: [{ type: "named", name: "--port", value: "{port}", variables: { port: {} } }],
      }),
    )
      .why,
    /template variables/,
  );
  assert.match(
    refused(npm({ transport: { type: "streamable-http", url: "http://localhost:3000/mcp" } })).why,
    /stdio only/,
  );
  assert.match(refused(npm({ registryType: "cargo" })).why, /package type "cargo" is not supported/);
  // runtimeArguments are never passed; the question says so.
  const withRuntime = plan(
    npm({ runtimeArguments: [{ type: "named", name: "--node-options", value: "--x" }] }),
  );
  assert.deepEqual(withRuntime.command, ["npx", "-y", "example-server@1.2.3"]);
  assert.deepEqual(withRuntime.notes, ["The entry's runtime arguments (1) are not passed."]);
  // A named argument with a fixed value is one argv element.
  assert.deepEqual(
    argv(plan(npm({ packageArguments: [{ type: "named", name: "--mode", value: "read only" }] })), {}).slice(
      -1,
    ),
    ["--mode=read only"],
  );
});

Deno.test("remotes: Streamable HTTP over https (or plain http on loopback), no credentials or templates", () => {
  const remote = (r: Record<string, unknown>) => ({
    name: "io.example/remote",
    description: "d",
    version: "2.0.0",
    remotes: [{ type: "streamable-http", url: "https://mcp.example.com/mcp", ...r }],
  });
  const ok = plan(remote({ headers: [{ name: "Authorization", isSecret: true, isRequired: true }] }));
  assert.equal(ok.url, "https://mcp.example.com/mcp");
  assert.equal(ok.target, "mcp.example.com");
  assert.equal(ok.version, "2.0.0");
  assert.deepEqual(ok.inputs.map((i) => [i.kind, i.name, i.secret, i.required]), [[
    "header",
    "Authorization",
    true,
    true,
  ]]);
  assert.equal(plan(remote({ url: "http://127.0.0.1:8080/mcp" })).target, "127.0.0.1:8080");
  assert.match(refused(remote({ url: "http://mcp.example.com/mcp" })).why, /not https/);
  assert.match(refused(remote({ url: "https://user:pw@mcp.example.com/mcp" })).why, /carries credentials/);
  assert.match(refused(remote({ url: "https://{tenant}.example.com/mcp" })).why, /template variables/);
  assert.match(refused(remote({ type: "sse" })).why, /Streamable HTTP remotes only/);
  assert.match(
    refused(remote({ headers: [{ name: "Host" }] })).why,
    /header "Host" is not one codemode sends/,
  );
  assert.match(
    refused(remote({ headers: [{ name: "X-A", value: "a\r\nInjected: 1" }] })).why,
    /control characters/,
  );
});

Deno.test("oversized, malformed and deleted entries are left out with the reason; text is made safe", () => {
  const huge = parseEntry({
    server: { name: "io.x/huge", description: "m".repeat(5_000_000), version: "1" },
  });
  assert.ok("leftOut" in huge);
  assert.equal(huge.leftOut.name, "io.x/huge");
  assert.match(huge.leftOut.why, /description: Too big/);
  for (
    const [item, why] of [
      [null, /not an object/],
      [{ server: { name: "no slash", version: "1" } }, /reverse-DNS name/],
      [{ server: { name: "io.x/y", version: "1", packages: "npm" } }, /packages/],
      [{ server: { name: "io.x/y", version: "1", packages: Array(100).fill({}) } }, /packages: Too big/],
    ] as const
  ) {
    const parsed = parseEntry(item);
    assert.ok("leftOut" in parsed);
    assert.match(parsed.leftOut.why, why);
  }
  const deleted = parseEntry({
    server: { name: "io.x/gone", version: "1" },
    _meta: { "io.modelcontextprotocol.registry/official": { status: "deleted" } },
  });
  assert.deepEqual(deleted, { leftOut: { name: "io.x/gone", why: "deleted from the registry" } });
  // A bare server.json (older registries) is read too.
  assert.ok("entry" in parseEntry({ name: "io.x/bare", version: "1" }));
  assert.equal(clean("a\u001b]52;c;SGVsbG8=\u0007b\u202e\u009bc\n\nd"), "a ]52;c;SGVsbG8= b c d");
  assert.equal(clean("x".repeat(50), 10), "xxxxxxxxx…");
});
