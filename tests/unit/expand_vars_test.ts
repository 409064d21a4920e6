import assert from "node:assert/strict";
import { braceBareVars, expandServer, expandVars } from "../../core/config/expand_vars.ts";
import type { ServerSpec } from "../../core/contracts/discovery.ts";

const context = {
  home: "/home/alice",
  cwd: "/home/alice/work/app",
  env: { TOKEN: "t0k", EMPTY: "", HOME: "/home/alice" } as Record<string, string | undefined>,
};

Deno.test("expandVars() replaces ${VAR} and ${env:VAR} from the environment", () => {
  assert.deepEqual(expandVars("a ${TOKEN} b ${env:TOKEN} c", context), {
    value: "a t0k b t0k c",
    unset: [],
    inputs: [],
    unsupported: [],
  });
});

Deno.test("expandVars() uses the default of ${VAR:-default} when the variable is unset or empty", () => {
  assert.equal(expandVars("Bearer ${DOCS_TOKEN:-none}", context).value, "Bearer none");
  assert.equal(expandVars("${EMPTY:-fallback}", context).value, "fallback");
  assert.equal(expandVars("${TOKEN:-fallback}", context).value, "t0k");
  assert.equal(expandVars("${MISSING:-}", context).value, "");
  assert.deepEqual(expandVars("${MISSING:-x}", context).unset, []);
});

Deno.test("expandVars() expands an unset variable to an empty string and names it", () => {
  const result = expandVars("${GITHUB_TOKEN}/${env:OTHER}", context);
  assert.equal(result.value, "/");
  assert.deepEqual(result.unset, ["GITHUB_TOKEN", "OTHER"]);
});

Deno.test("expandVars() keeps a set but empty variable empty without calling it unset", () => {
  assert.deepEqual(expandVars("[${EMPTY}]", context), {
    value: "[]",
    unset: [],
    inputs: [],
    unsupported: [],
  });
});

Deno.test("expandVars() expands VS Code's ${workspaceFolder}, ${workspaceFolderBasename} and ${userHome}", () => {
  assert.equal(
    expandVars("${workspaceFolder}|${workspaceFolderBasename}|${userHome}", context).value,
    "/home/alice/work/app|app|/home/alice",
  );
});

Deno.test("expandVars() leaves ${input:id} in place and reports the id", () => {
  const result = expandVars("key=${input:brave-key}", context);
  assert.equal(result.value, "key=${input:brave-key}");
  assert.deepEqual(result.inputs, ["brave-key"]);
});

Deno.test("expandVars() leaves references it does not understand verbatim and reports them", () => {
  const result = expandVars("${command:pick} ${config:x.y}", context);
  assert.equal(result.value, "${command:pick} ${config:x.y}");
  assert.deepEqual(result.unsupported, ["${command:pick}", "${config:x.y}"]);
});

Deno.test("expandVars() does not touch bare $VAR or text without references", () => {
  assert.equal(expandVars("pa$word $TOKEN 100%", context).value, "pa$word $TOKEN 100%");
});

Deno.test("braceBareVars() rewrites Gemini's $VAR into ${VAR} and keeps braced references", () => {
  assert.equal(braceBareVars("$API_KEY and ${OTHER} and $1 and $"), "${API_KEY} and ${OTHER} and $1 and $");
});

const source = { plugin: "test", file: "/cfg.json", key: "mcpServers.x", scope: "user" };

Deno.test("expandServer() expands command, args, env values, cwd, url and header values", () => {
  const spec: ServerSpec = {
    name: "x",
    transport: "stdio",
    command: "${userHome}/bin/${TOKEN}",
    args: ["--root", "${workspaceFolder}"],
    env: { KEY: "${TOKEN}", "${TOKEN}": "keys stay" },
    cwd: "${HOME}/tmp",
    description: "${TOKEN} in a description stays",
    source,
  };
  const { spec: out, diagnostics, unusable } = expandServer(spec, context);
  assert.deepEqual(out, {
    ...spec,
    command: "/home/alice/bin/t0k",
    args: ["--root", "/home/alice/work/app"],
    env: { KEY: "t0k", "${TOKEN}": "keys stay" },
    cwd: "/home/alice/tmp",
  });
  assert.deepEqual(diagnostics, []);
  assert.equal(unusable, undefined);

  const remote: ServerSpec = {
    name: "r",
    transport: "http",
    url: "https://${HOST:-example.com}/mcp",
    headers: { Authorization: "Bearer ${TOKEN}" },
    source,
  };
  const expanded = expandServer(remote, context).spec;
  assert.equal(expanded.url, "https://example.com/mcp");
  assert.deepEqual(expanded.headers, { Authorization: "Bearer t0k" });
});

Deno.test("expandServer() warns once per unset variable, naming it and the server", () => {
  const spec: ServerSpec = {
    name: "github",
    transport: "stdio",
    command: "npx",
    args: ["${GITHUB_TOKEN}"],
    env: { A: "${GITHUB_TOKEN}" },
    source,
  };
  const { spec: out, diagnostics, unusable } = expandServer(spec, context);
  assert.deepEqual(out.env, { A: "" });
  assert.deepEqual(out.args, [""]);
  assert.equal(unusable, undefined);
  assert.deepEqual(diagnostics, [{
    severity: "warning",
    file: "/cfg.json",
    server: "github",
    message: 'Environment variable "GITHUB_TOKEN" is not set: server "github" gets an empty value; ' +
      "export it before starting codemode",
  }]);
});

Deno.test("expandServer() marks a server with ${input:...} unusable with an error diagnostic", () => {
  const spec: ServerSpec = {
    name: "brave-search",
    transport: "stdio",
    command: "npx",
    env: { BRAVE_API_KEY: "${input:brave-key}" },
    source,
  };
  const { diagnostics, unusable } = expandServer(spec, context);
  assert.equal(
    unusable,
    'needs "${input:brave-key}", which only the client that owns the config can prompt for',
  );
  assert.equal(diagnostics.length, 1);
  assert.equal(diagnostics[0].severity, "error");
  assert.equal(diagnostics[0].server, "brave-search");
  assert.match(diagnostics[0].message, /^Server "brave-search" needs "\$\{input:brave-key\}"/);
});
