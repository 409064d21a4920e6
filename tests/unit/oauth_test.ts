/**
 * The OAuth pieces that need no server: the token store's files, the `oauth` config key as Claude Code and
 * VS Code write it, which servers log in, the provider's persistence, the login error, redaction of
 * tokens, doctor's "needs login" finding, and the Python exception type.
 */
import assert from "node:assert/strict";
import { InsufficientScopeError, SdkError, SdkErrorCode, SdkHttpError } from "@modelcontextprotocol/client";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { DiscoveryContext, ServerSpec } from "../../core/contracts/discovery.ts";
import { type StoredAuth, TokenStore } from "../../core/auth/token_store.ts";
import { StoredOAuthProvider } from "../../core/auth/oauth_provider.ts";
import { OAuthClients, sendsOwnAuthorization, usesOAuth } from "../../core/auth/clients.ts";
import { loginRefusal } from "../../core/auth/login.ts";
import { loginCommand, NeedsLoginError } from "../../core/auth/needs_login.ts";
import { quietSdk } from "../../core/auth/sdk_warnings.ts";
import { redact, REDACTED, redactToolError, secretsOf } from "../../core/upstream/redact.ts";
import {
  explainCallFailure,
  unauthorizedAfterRefresh,
  UpstreamAuthError,
} from "../../core/upstream/errors.ts";
import { pythonErrorType } from "../../core/host_api/rpc.ts";
import { checkServers, type DiscoveryFacts } from "../../core/doctor/checks.ts";
import { expandServer } from "../../core/config/expand_vars.ts";
import { claudeCode, vscode } from "../../plugins/discovery/mod.ts";
import { setLogSink } from "../../core/observe/log.ts";

const source = { plugin: "test", file: "/tmp/test.json", key: "mcpServers.remote" };
const remote = (extra: Partial<ServerSpec> = {}): ServerSpec => ({
  name: "remote",
  transport: "http",
  url: "https://mcp.example.com/mcp",
  source,
  ...extra,
});
const TOKEN = "gho_16C7e42F292c6912E7710c838347Ae178B4a";

async function tempDir(): Promise<string> {
  return await mkdtemp(join(tmpdir(), "codemode-oauth-unit-"));
}

Deno.test("the token store writes one 0600 file per server and URL in a 0700 folder, atomically", async () => {
  const dir = await tempDir();
  try {
    const store = new TokenStore(dir);
    const record: StoredAuth = {
      version: 1,
      server: "remote",
      serverUrl: "https://mcp.example.com/mcp",
      tokens: { access_token: TOKEN, token_type: "Bearer" },
    };
    await store.write(record);
    await store.write({ ...record, expiresAt: 1 });
    const file = store.pathFor("remote", record.serverUrl);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal((await stat(store.dir)).mode & 0o777, 0o700);
    assert.deepEqual(await readdir(store.dir), [file.split("/").pop()], "no temporary file is left");
    assert.deepEqual(await store.read("remote", record.serverUrl), { ...record, expiresAt: 1 });
    assert.notEqual(store.pathFor("remote", "https://other.example.com/mcp"), file, "per URL");
    assert.notEqual(store.pathFor("Remote", record.serverUrl), file, "per server");
    assert.match(store.pathFor("../../etc/passwd", "x"), /oauth\/\.\._\.\._etc_passwd-[0-9a-f]{16}\.json$/);
    assert.equal(await store.read("remote", "https://other.example.com/mcp"), undefined);
    const before = await store.stamp("remote", record.serverUrl);
    await new Promise((r) => setTimeout(r, 5));
    await store.write({ ...record, expiresAt: 2 });
    assert.notEqual(await store.stamp("remote", record.serverUrl), before, "a rewrite changes the stamp");
    assert.equal(await store.remove("remote", record.serverUrl), true);
    assert.equal(await store.remove("remote", record.serverUrl), false);
    assert.equal(await store.stamp("remote", record.serverUrl), "");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("a damaged token file is ignored with a warning that does not quote it", async () => {
  const dir = await tempDir();
  const lines: string[] = [];
  setLogSink((line) => lines.push(line));
  try {
    const store = new TokenStore(dir);
    const file = store.pathFor("remote", "https://mcp.example.com/mcp");
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, `{"version":1,"tokens":{"access_token":"${TOKEN}"`);
    assert.equal(await store.read("remote", "https://mcp.example.com/mcp"), undefined);
    assert.equal(lines.length, 1);
    assert.match(lines[0], /damaged OAuth credentials file/);
    assert.ok(!lines[0].includes(TOKEN));
  } finally {
    setLogSink((line) => console.error(line));
    await rm(dir, { recursive: true, force: true });
  }
});

async function withFiles(
  files: Record<string, string>,
  fn: (root: string, c: DiscoveryContext) => Promise<void>,
) {
  const root = await tempDir();
  try {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
    await fn(root, { home: join(root, "home"), cwd: join(root, "work"), platform: "linux", env: {} });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

Deno.test("the oauth key is read in the shapes Claude Code and VS Code write", async () => {
  await withFiles({
    "work/.mcp.json": JSON.stringify({
      mcpServers: {
        github: {
          type: "http",
          url: "https://api.githubcopilot.com/mcp/",
          oauth: {
            clientId: "Iv1.abc",
            callbackPort: 33418,
            scopes: "repo read:org",
            authServerMetadataUrl: "x",
          },
        },
        broken: { type: "http", url: "https://x.example/mcp", oauth: { callbackPort: "8080" } },
      },
    }),
    "home/.config/Code/User/mcp.json": JSON.stringify({
      servers: {
        linear: {
          type: "http",
          url: "https://mcp.linear.app/mcp",
          oauth: { clientId: "vsc-1", scopes: ["a", "b"] },
        },
        local: { command: "x", oauth: { clientId: "ignored" } },
      },
    }),
  }, async (root, context) => {
    const claude = await claudeCode().read(join(root, "work/.mcp.json"), context);
    assert.deepEqual(claude.servers.find((s) => s.name === "github")?.oauth, {
      clientId: "Iv1.abc",
      callbackPort: 33418,
      scopes: "repo read:org",
    });
    assert.match(claude.diagnostics[0].message, /Server "broken" .* oauth\.callbackPort/);
    const code = await vscode().read(join(root, "home/.config/Code/User/mcp.json"), context);
    assert.deepEqual(code.servers.find((s) => s.name === "linear")?.oauth, {
      clientId: "vsc-1",
      scopes: "a b",
    });
    assert.equal(
      code.servers.find((s) => s.name === "local")?.oauth,
      undefined,
      "stdio servers have no login",
    );
  });
});

Deno.test("the client id and secret expand variables, and the secret is redacted like any config secret", () => {
  const { spec } = expandServer(
    remote({ oauth: { clientId: "${ID}", clientSecret: "${SECRET}" } }),
    {
      env: { ID: "my-client", SECRET: "s3cr3t-value-42" },
    } as unknown as Parameters<typeof expandServer>[1],
  );
  assert.deepEqual(spec.oauth, { clientId: "my-client", clientSecret: "s3cr3t-value-42" });
  assert.equal(redact("secret=s3cr3t-value-42", secretsOf(spec)), `secret=${REDACTED}`);
});

Deno.test("remote servers log in unless their config sends an Authorization header; stdio ones never", () => {
  assert.equal(usesOAuth(remote()), true);
  assert.equal(usesOAuth(remote({ transport: "sse" })), true);
  assert.equal(usesOAuth(remote({ headers: { authorization: "Bearer x" } })), false);
  assert.equal(sendsOwnAuthorization(remote({ headers: { AUTHORIZATION: "token" } })), true);
  assert.equal(usesOAuth(remote({ headers: { "X-Api-Key": "k" } })), true);
  assert.equal(usesOAuth({ name: "s", transport: "stdio", command: "x", source }), false);
  const clients = new OAuthClients("/nonexistent");
  assert.equal(clients.forServer(remote()), clients.forServer(remote()), "one state per server");
  assert.equal(clients.forServer(remote({ headers: { Authorization: "x" }, name: "h" })), undefined);
  assert.match(
    loginRefusal(remote({ headers: { Authorization: "x" } }))!,
    /already sends an Authorization header/,
  );
  assert.match(
    loginRefusal({ name: "s", transport: "stdio", command: "x", source })!,
    /local \(stdio\) server/,
  );
  assert.equal(loginRefusal(remote()), undefined);
});

Deno.test("the needs-login error names the command, quoted for a shell when the name needs it", () => {
  assert.equal(loginCommand("github"), "codemode auth login github");
  assert.equal(loginCommand("my server's"), `codemode auth login 'my server'\\''s'`);
  const error = new NeedsLoginError("github", "its refresh token was refused");
  assert.equal(
    error.message,
    'MCP server "github" needs a login: its refresh token was refused; run `codemode auth login github`',
  );
  const explained = explainCallFailure(new Error("wrapped", { cause: error }), {
    server: "github",
    tool: "search",
    timeoutMs: 1000,
    remote: true,
    ended: "lost the connection",
  });
  assert.ok(explained instanceof UpstreamAuthError, "a login problem is not a lost connection");
  assert.equal(explained.message, error.message);
  assert.equal(pythonErrorType(explained), "PermissionError");
  const scope = explainCallFailure(new InsufficientScopeError({ requiredScope: "workflow" }), {
    server: "github",
    tool: "run_workflow",
    timeoutMs: 1000,
    remote: true,
  });
  assert.ok(scope instanceof UpstreamAuthError);
  assert.match(
    scope.message,
    /lacks the scope "workflow"; add it to the server's oauth.scopes and run `codemode auth login github`/,
  );
  const odd = explainCallFailure(new InsufficientScopeError({ requiredScope: 'x"\n<script>' }), {
    server: "github",
    tool: "t",
    timeoutMs: 1000,
    remote: true,
  });
  assert.match(odd.message, /lacks a scope the tool needs/);
});

Deno.test("the SDK's 401 after re-authentication is told apart from other HTTP and SDK errors", () => {
  const again = new SdkHttpError(
    SdkErrorCode.ClientHttpAuthentication,
    "Server returned 401 after re-authentication",
    {
      status: 401,
    },
  );
  assert.equal(unauthorizedAfterRefresh(again), true);
  assert.equal(unauthorizedAfterRefresh(new Error("Streamable HTTP failed", { cause: again })), true);
  assert.equal(
    unauthorizedAfterRefresh(new SdkHttpError(SdkErrorCode.ClientHttpForbidden, "403", { status: 403 })),
    false,
  );
  assert.equal(unauthorizedAfterRefresh(new SdkError(SdkErrorCode.ConnectionClosed, "closed")), false);
  assert.equal(unauthorizedAfterRefresh(new Error("Server returned 401 after re-authentication")), false);
});

Deno.test("the provider persists what auth() hands it, with absolute expiry, and never registers a configured client", async () => {
  const dir = await tempDir();
  try {
    const store = new TokenStore(dir);
    const dynamic = new StoredOAuthProvider({
      spec: remote(),
      store,
      redirectUrl: "http://127.0.0.1:5555/callback",
    });
    assert.deepEqual(dynamic.clientMetadata, {
      client_name: "codemode",
      redirect_uris: ["http://127.0.0.1:5555/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    await dynamic.saveClientInformation({
      client_id: "dyn",
      redirect_uris: ["http://127.0.0.1:5555/callback"],
    });
    const before = Date.now();
    await dynamic.saveTokens({
      access_token: TOKEN,
      token_type: "Bearer",
      expires_in: 60,
      refresh_token: "r-123456",
    });
    const stored = (await store.read("remote", remote().url!))!;
    assert.equal(stored.client?.client_id, "dyn");
    assert.ok(stored.expiresAt! >= before + 60_000 && stored.expiresAt! <= Date.now() + 60_000);
    // A headless provider (serve) names the registered redirect and cannot start a browser login.
    const headless = new StoredOAuthProvider({ spec: remote(), store, record: stored });
    assert.equal(headless.redirectUrl, "http://127.0.0.1:5555/callback");
    await assert.rejects(
      Promise.resolve(headless.redirectToAuthorization(new URL("https://as.example/authorize"))),
      NeedsLoginError,
    );

    const configured = remote({ oauth: { clientId: "app", clientSecret: "app-secret-1", scopes: "repo" } });
    const provider = new StoredOAuthProvider({ spec: configured, store });
    assert.deepEqual(provider.clientInformation(), { client_id: "app", client_secret: "app-secret-1" });
    assert.equal(provider.clientMetadata.token_endpoint_auth_method, "client_secret_post");
    assert.equal(provider.clientMetadata.scope, "repo");
    await provider.saveClientInformation({
      client_id: "app",
      client_secret: "app-secret-1",
      issuer: "https://as",
    });
    assert.equal(provider.clientInformation()?.issuer, "https://as", "the issuer stamp is kept in memory");
    assert.equal(
      (await store.read("remote", remote().url!))?.client?.client_id,
      "dyn",
      "the store is untouched",
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("invalidating tokens keeps ones another process stored meanwhile, else drops them", async () => {
  const dir = await tempDir();
  try {
    const store = new TokenStore(dir);
    const mine = new StoredOAuthProvider({ spec: remote(), store });
    await mine.saveTokens({
      access_token: "mine-access",
      token_type: "Bearer",
      refresh_token: "mine-refresh",
    });
    const theirs = new StoredOAuthProvider({
      spec: remote(),
      store,
      record: (await store.read("remote", remote().url!))!,
    });
    await theirs.saveTokens({
      access_token: "their-access",
      token_type: "Bearer",
      refresh_token: "their-refresh",
    });
    await mine.invalidateCredentials("tokens");
    assert.equal(mine.tokens()?.access_token, "their-access", "taken over, not deleted");
    assert.equal((await store.read("remote", remote().url!))?.tokens?.refresh_token, "their-refresh");
    await mine.invalidateCredentials("tokens");
    assert.equal(mine.tokens(), undefined);
    assert.equal((await store.read("remote", remote().url!))?.tokens, undefined);
    assert.deepEqual(mine.invalidated, ["tokens", "tokens"]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("redaction covers quoted bearer credentials and the text of tool error results", () => {
  assert.equal(
    redact(`rejected Authorization: Bearer ${TOKEN}`, []),
    `rejected Authorization: Bearer ${REDACTED}`,
  );
  assert.equal(redact("use a Bearer token in the header", []), "use a Bearer token in the header");
  assert.equal(redact("DPoP abcdefghijklmnop1234", []), `DPoP ${REDACTED}`);
  const result = { content: [{ type: "text" as const, text: `bad token ${TOKEN}` }], isError: true };
  assert.deepEqual(redactToolError(result, [TOKEN]).content, [{
    type: "text",
    text: `bad token ${REDACTED}`,
  }]);
  const ok = { content: [{ type: "text" as const, text: TOKEN }] };
  assert.equal(redactToolError(ok, [TOKEN]), ok, "a successful result is the tool's data, untouched");
});

Deno.test("the SDK's console warnings go to the caller during an OAuth call, and stderr is restored", async () => {
  const original = console.warn;
  const notes: string[] = [];
  const value = await quietSdk((n) => notes.push(n), async () => {
    console.warn("[mcp-sdk] OAuth note", "two");
    await quietSdk(() => {}, () => Promise.resolve());
    console.warn("still captured");
    return 7;
  });
  assert.equal(value, 7);
  assert.deepEqual(notes, ["[mcp-sdk] OAuth note two", "still captured"]);
  assert.equal(console.warn, original);
});

Deno.test("doctor reports a server that needs a login as a warning with the login command", async () => {
  const facts: DiscoveryFacts = {
    servers: [remote({ name: "github" }), remote({ name: "linear" })],
    skipped: [],
    diagnostics: [],
    files: [],
  };
  const failing = (name: string) =>
    name === "github"
      ? Promise.reject(
        new UpstreamAuthError('MCP server "github" needs a login: x; run `codemode auth login github`', name),
      )
      : Promise.resolve([{}]);
  const full = await checkServers(
    facts,
    failing,
    1000,
    new Map(),
    (name) => Promise.resolve(name === "linear" ? { auth: "logged-in" as const } : undefined),
  );
  assert.deepEqual(full.map((c) => [c.name, c.status, c.auth]), [["github", "warn", "needs-login"], [
    "linear",
    "ok",
    "logged-in",
  ]]);
  assert.equal(full[0].problem?.fix, "Run `codemode auth login github`");
  const quick = await checkServers(
    facts,
    undefined,
    1000,
    new Map(),
    (name) => Promise.resolve({ auth: name === "github" ? "needs-login" as const : "none" as const }),
  );
  assert.deepEqual(quick.map((c) => [c.status, c.auth]), [["warn", "needs-login"], ["info", "none"]]);
});

Deno.test("nothing in core/auth prints: the CLI owns the terminal", async () => {
  const dir = new URL("../../core/auth/", import.meta.url);
  for (const name of await readdir(dir)) {
    if (!name.endsWith(".ts")) continue;
    const text = await readFile(new URL(name, dir), "utf8");
    assert.ok(
      !/console\.(log|error|info)|process\.std(out|err)/.test(text),
      `${name} writes to the terminal`,
    );
  }
});
