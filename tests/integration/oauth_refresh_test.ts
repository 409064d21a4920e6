/**
 * The refresh rules of `ServerAuth`, against the real local OAuth server (in process, no serve): one
 * refresh for many callers, none for a late 401 that answered an old token, tokens another codemode
 * process refreshed are taken over, a refused refresh blocks without touching the network until the
 * stored credentials change, a refresh that failed for no stated reason is retried after a pause, and a
 * server that refuses even a freshly refreshed token needs a login (through the upstream pool, as sandbox
 * calls reach it); two processes sharing one token folder (a fleet's nodes) refresh once between them.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { login } from "../../core/auth/login.ts";
import { NeedsLoginError } from "../../core/auth/needs_login.ts";
import { OAuthClients } from "../../core/auth/clients.ts";
import { probeAuth } from "../../core/auth/probe.ts";
import { UpstreamAuthError, UpstreamPool } from "../../core/upstream/pool.ts";
import { RETRY_AFTER_FAILED_REFRESH_MS, ServerAuth } from "../../core/auth/server_auth.ts";
import { TokenStore } from "../../core/auth/token_store.ts";
import { startOAuthServer } from "../testdata/servers/oauth_server.ts";
import { approve, approveWithoutFollowing } from "./_oauth.ts";

const source = { plugin: "test", file: "test.json", key: "mcpServers.secure" };

async function setup(ttl = 3600) {
  const oauth = await startOAuthServer({ accessTokenTtl: ttl });
  const store = new TokenStore(mkdtempSync(join(tmpdir(), "codemode-oauth-")));
  const spec: ServerSpec = { name: "secure", transport: "http", url: oauth.mcpUrl, source };
  await login(spec, { store, authorize: async (url) => void await approve(url.href) });
  return { oauth, store, spec };
}

/** A request to the server with `token`, as the transport would send it. */
function request(auth: ServerAuth, url: string, token: string | undefined): Promise<Response> {
  return auth.fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
}

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test("twenty callers of an expired token share one refresh", opts, async () => {
  const { oauth, store, spec } = await setup(2);
  try {
    let now = Date.now();
    const auth = new ServerAuth(spec, store, { now: () => now });
    const first = await auth.token();
    now += 5_000; // past the 2-second lifetime
    const tokens = await Promise.all(Array.from({ length: 20 }, () => auth.token()));
    assert.equal(oauth.counts.refreshes, 1);
    assert.equal(new Set(tokens).size, 1);
    assert.notEqual(tokens[0], first);
  } finally {
    await oauth.close();
  }
});

Deno.test("a 401 that answered an older token does not refresh again", opts, async () => {
  const { oauth, store, spec } = await setup();
  try {
    const auth = new ServerAuth(spec, store);
    const old = (await auth.token())!;
    oauth.revokeAccessTokens();
    const [a, b] = await Promise.all([request(auth, spec.url!, old), request(auth, spec.url!, old)]);
    assert.equal(a.status, 401);
    assert.equal(b.status, 401);
    await auth.onUnauthorized({ response: a, serverUrl: new URL(spec.url!), fetchFn: auth.fetch });
    assert.equal(oauth.counts.refreshes, 1);
    // The second 401 arrives after the refresh finished: its request carried the old token.
    await auth.onUnauthorized({ response: b, serverUrl: new URL(spec.url!), fetchFn: auth.fetch });
    assert.equal(oauth.counts.refreshes, 1, "no second refresh");
    const fresh = await auth.token();
    assert.notEqual(fresh, old);
    assert.equal((await request(auth, spec.url!, fresh)).status, 200);
  } finally {
    await oauth.close();
  }
});

Deno.test(
  "tokens another codemode process refreshed (rotating the refresh token) are taken over",
  opts,
  async () => {
    const { oauth, store, spec } = await setup();
    try {
      const mine = new ServerAuth(spec, store);
      const theirs = new ServerAuth(spec, store);
      const held = (await mine.token())!;
      await theirs.token();
      oauth.revokeAccessTokens();
      // The other process refreshes first: the refresh token both held is now spent.
      const refused = await request(theirs, spec.url!, held);
      await theirs.onUnauthorized({
        response: refused,
        serverUrl: new URL(spec.url!),
        fetchFn: theirs.fetch,
      });
      assert.equal(oauth.counts.refreshes, 1);
      const mineRefused = await request(mine, spec.url!, held);
      await mine.onUnauthorized({
        response: mineRefused,
        serverUrl: new URL(spec.url!),
        fetchFn: mine.fetch,
      });
      assert.equal(oauth.counts.refreshFailures, 0, "the spent refresh token was never sent");
      const token = await mine.token();
      assert.equal(token, await theirs.token());
      assert.equal((await request(mine, spec.url!, token)).status, 200);
    } finally {
      await oauth.close();
    }
  },
);

/** Runs `token()` of a ServerAuth over the token folder `dir` in a process of its own, at wall time `at`. */
function refreshInProcess(dir: string, spec: ServerSpec, at: number): Promise<string> {
  const script = `
    import { ServerAuth } from "${new URL("../../core/auth/server_auth.ts", import.meta.url).href}";
    import { TokenStore } from "${new URL("../../core/auth/token_store.ts", import.meta.url).href}";
    const auth = new ServerAuth(${JSON.stringify(spec)}, new TokenStore("unused", ${JSON.stringify(dir)}));
    await new Promise((r) => setTimeout(r, Math.max(0, ${at} - Date.now())));
    console.log(await auth.token());
  `;
  const child = spawn(Deno.execPath(), ["eval", "--quiet", script], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (err += d));
  return new Promise((resolve, reject) =>
    child.once("exit", (code) => code === 0 ? resolve(out.trim()) : reject(new Error(`exit ${code}: ${err}`)))
  );
}

Deno.test(
  "two processes sharing the token folder refresh at the same moment: one refresh, no spent token sent",
  opts,
  async () => {
    const oauth = await startOAuthServer({ accessTokenTtl: 2 });
    const dir = mkdtempSync(join(tmpdir(), "codemode-oauth-shared-"));
    const store = new TokenStore("unused", dir);
    const spec: ServerSpec = { name: "secure", transport: "http", url: oauth.mcpUrl, source };
    try {
      await login(spec, { store, authorize: async (url) => void await approve(url.href) });
      const before = (await store.read(spec.name, spec.url!))!.tokens!.access_token;
      // Both start now, load their code, and ask for a token at the same instant, after it expired.
      const at = Date.now() + 4_000;
      const [a, b] = await Promise.all([refreshInProcess(dir, spec, at), refreshInProcess(dir, spec, at)]);
      assert.equal(oauth.counts.refreshes, 1, "the second process took the first one's tokens");
      assert.equal(oauth.counts.refreshFailures, 0, "the spent refresh token was never sent");
      assert.equal(a, b);
      assert.notEqual(a, before);
      const stored = await store.read(spec.name, spec.url!);
      assert.equal(stored?.tokens?.access_token, a, "the shared file is whole and holds the new tokens");
      assert.deepEqual(readdirSync(dir).filter((f) => !f.endsWith(".json")), [], "no lock or temp file left");
    } finally {
      await oauth.close();
    }
  },
);

Deno.test("a refused refresh blocks at once without network until a new login is stored", opts, async () => {
  const { oauth, store, spec } = await setup();
  try {
    const auth = new ServerAuth(spec, store);
    const held = (await auth.token())!;
    oauth.revokeRefreshTokens();
    oauth.revokeAccessTokens();
    const refused = await request(auth, spec.url!, held);
    await assert.rejects(
      auth.onUnauthorized({ response: refused, serverUrl: new URL(spec.url!), fetchFn: auth.fetch }),
      (e: Error) =>
        e instanceof NeedsLoginError &&
        /refused the refresh token.*codemode auth login secure/.test(e.message),
    );
    assert.equal(auth.state(), "needs-login");
    const seen = { ...oauth.counts };
    const started = performance.now();
    await assert.rejects(auth.token(), NeedsLoginError);
    assert.ok(performance.now() - started < 100, "blocked without waiting");
    assert.deepEqual(oauth.counts, seen, "nothing was sent anywhere");
    assert.equal(
      (await store.read(spec.name, spec.url!))?.tokens,
      undefined,
      "the refused tokens were dropped",
    );

    await login(spec, { store, authorize: async (url) => void await approve(url.href) });
    const token = await auth.token();
    assert.ok(token);
    assert.equal(auth.state(), "logged-in");
    assert.equal((await request(auth, spec.url!, token)).status, 200);
  } finally {
    await oauth.close();
  }
});

Deno.test(
  "a refresh that failed for no stated reason (server down) is retried after a pause",
  opts,
  async () => {
    const { oauth, store, spec } = await setup(2);
    let now = Date.now();
    const auth = new ServerAuth(spec, store, { now: () => now });
    await auth.token();
    const record = (await store.read(spec.name, spec.url!))!;
    await oauth.close(); // the authorization server is unreachable from now on
    now += 5_000;
    await assert.rejects(
      auth.token(),
      (e: Error) => e instanceof NeedsLoginError && /refreshing its OAuth tokens failed/.test(e.message),
    );
    await assert.rejects(auth.token(), NeedsLoginError);
    assert.ok((await store.read(spec.name, spec.url!))?.tokens, "unexplained failures keep the tokens");
    now += RETRY_AFTER_FAILED_REFRESH_MS + 1;
    // Due for another try: it fails again the same way, but it did try (the block had lifted).
    await assert.rejects(auth.token(), /refreshing its OAuth tokens failed/);
    assert.equal(
      (await store.read(spec.name, spec.url!))?.tokens?.refresh_token,
      record.tokens?.refresh_token,
    );
  },
);

/** A pool calling the OAuth server as `serve` does, over `clients`, logged in through `relogin`. */
async function loggedInPool() {
  const oauth = await startOAuthServer();
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-oauth-"));
  const spec: ServerSpec = { name: "secure", transport: "http", url: oauth.mcpUrl, source };
  const clients = new OAuthClients(stateDir);
  const relogin = () =>
    login(spec, { store: clients.store, authorize: async (url) => void await approve(url.href) });
  await relogin();
  const pool = new UpstreamPool([spec], { auth: (s) => clients.forServer(s) });
  const echo = async (message: string) =>
    (await pool.callTool("secure", "echo", { message })).content
      .map((c) => (c as { text?: string }).text).join("");
  return { oauth, stateDir, spec, relogin, pool, echo };
}

/** The error a sandbox call gets from a server that needs a login: it names the command that fixes it. */
const needsLoginAnswer = (e: Error) =>
  e instanceof UpstreamAuthError &&
  /^MCP server "secure" needs a login: it refused even a freshly refreshed access token; run `codemode auth login secure`$/
    .test(e.message);

/**
 * The calls after the first refusal: each fails at once with the same message and sends nothing; another
 * process's probe (`codemode servers`, `doctor --quick`) agrees; a fresh login makes the pool work again.
 */
async function failsFastUntilLogin(setup: Awaited<ReturnType<typeof loggedInPool>>): Promise<void> {
  const { oauth, stateDir, spec, relogin, pool, echo } = setup;
  const after = { ...oauth.counts };
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    await assert.rejects(echo("again"), needsLoginAnswer);
    assert.ok(performance.now() - started < 500, "failed fast");
  }
  await assert.rejects(pool.listTools("secure"), needsLoginAnswer);
  assert.deepEqual(oauth.counts, after, "nothing was sent anywhere: no start, no refresh");
  assert.equal(pool.status("secure").auth, "needs-login");

  const probed = await probeAuth(spec, new OAuthClients(stateDir).forServer(spec));
  assert.equal(probed.auth, "needs-login");
  assert.match(probed.problem ?? "", /run `codemode auth login secure`/);

  // The user regains access to the server and logs in again: the same pool works.
  oauth.rejectAllTokens(false);
  await relogin();
  assert.equal(await echo("after"), "after");
  assert.equal(pool.status("secure").auth, "logged-in");
}

Deno.test(
  "a server that refuses even a refreshed token mid-session needs a login: one refresh, then fail fast",
  opts,
  async () => {
    const setup = await loggedInPool();
    const { oauth, pool, echo } = setup;
    try {
      assert.equal(await echo("before"), "before");
      assert.equal(pool.status("secure").auth, "logged-in");
      oauth.rejectAllTokens();
      const refreshes = oauth.counts.refreshes;
      const seen = oauth.requests().length;
      await assert.rejects(echo("refused"), needsLoginAnswer);
      assert.equal(oauth.counts.refreshes - refreshes, 1, "one refresh for the failed call");
      assert.deepEqual(
        oauth.requests().slice(seen).map((r) => r.method),
        ["POST", "POST"],
        "the call and its one retry after the refresh",
      );
      assert.equal(pool.status("secure").auth, "needs-login");
      await failsFastUntilLogin(setup);
      assert.equal(pool.status("secure").restarts, 0, "the session was never dropped");
    } finally {
      await pool.close();
      await oauth.close();
    }
  },
);

Deno.test(
  "a server that refuses even a refreshed token at connect time needs a login, without an SSE fallback",
  opts,
  async () => {
    const setup = await loggedInPool();
    const { oauth, pool, echo } = setup;
    try {
      oauth.rejectAllTokens();
      await assert.rejects(echo("refused"), needsLoginAnswer);
      assert.equal(oauth.counts.refreshes, 1, "one refresh for the failed start");
      assert.deepEqual(
        oauth.requests().map((r) => r.method),
        ["POST", "POST"],
        "initialize and its one retry after the refresh; no SSE GET",
      );
      assert.equal(pool.status("secure").state, "failed");
      assert.equal(pool.status("secure").auth, "needs-login");
      await failsFastUntilLogin(setup);
    } finally {
      await pool.close();
      await oauth.close();
    }
  },
);

Deno.test(
  "the loopback callback refuses a wrong state and keeps waiting; the login then completes",
  opts,
  async () => {
    const oauth = await startOAuthServer();
    try {
      const store = new TokenStore(mkdtempSync(join(tmpdir(), "codemode-oauth-")));
      const spec: ServerSpec = { name: "secure", transport: "http", url: oauth.mcpUrl, source };
      const notices: string[] = [];
      const result = await login(spec, {
        store,
        notice: (m) => notices.push(m),
        authorize: async (url) => {
          const callback = await approveWithoutFollowing(url.href);
          for (const state of ["", "x", url.searchParams.get("state")!.slice(1)]) {
            const wrong = new URL(callback);
            wrong.searchParams.set("state", state);
            const answer = await fetch(wrong);
            await answer.body?.cancel();
            assert.equal(answer.status, 400);
          }
          const noState = new URL(callback);
          noState.searchParams.delete("state");
          assert.equal((await fetch(noState)).status, 400);
          assert.equal(oauth.counts.codeExchanges, 0);
          // Later, the real redirect arrives.
          setTimeout(() => fetch(callback).then((r) => r.body?.cancel()), 50);
        },
      });
      assert.equal(notices.length, 4);
      assert.deepEqual(result.scopes, ["mcp:read", "mcp:write"]);
      assert.equal(result.refreshable, true);
      assert.equal(oauth.counts.codeExchanges, 1);
    } finally {
      await oauth.close();
    }
  },
);

Deno.test("a login the user denies fails with the server's error code and stores nothing", opts, async () => {
  const oauth = await startOAuthServer();
  try {
    const store = new TokenStore(mkdtempSync(join(tmpdir(), "codemode-oauth-")));
    const spec: ServerSpec = { name: "secure", transport: "http", url: oauth.mcpUrl, source };
    await assert.rejects(
      login(spec, {
        store,
        authorize: async (url) => {
          const page = await (await fetch(url)).text();
          const deny = /id="deny" href="([^"]+)"/.exec(page)![1];
          await fetch(new URL(deny, url)).then((r) => r.body?.cancel());
        },
      }),
      /answered "access_denied" instead of a code/,
    );
    assert.equal(await store.read(spec.name, spec.url!), undefined);
  } finally {
    await oauth.close();
  }
});

Deno.test("a configured client id and secret are used instead of registering", opts, async () => {
  const oauth = await startOAuthServer();
  try {
    // Register once by hand, as an administrator registers an app for a server without dynamic registration.
    const registered = await (await fetch(new URL("register", oauth.issuer), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "pre-registered",
        redirect_uris: ["http://127.0.0.1:1/callback"],
        token_endpoint_auth_method: "client_secret_post",
      }),
    })).json() as { client_id: string; client_secret: string };
    const before = oauth.counts.registrations;
    const store = new TokenStore(mkdtempSync(join(tmpdir(), "codemode-oauth-")));
    const spec: ServerSpec = {
      name: "secure",
      transport: "http",
      url: oauth.mcpUrl,
      oauth: { clientId: registered.client_id, clientSecret: registered.client_secret, scopes: "mcp:read" },
      source,
    };
    const result = await login(spec, { store, authorize: async (url) => void await approve(url.href) });
    assert.equal(oauth.counts.registrations, before, "no dynamic registration");
    assert.deepEqual(result.scopes, ["mcp:read"], "the configured scopes were asked for");
    const stored = (await store.read(spec.name, spec.url!))!;
    assert.equal(stored.client, undefined, "the configured client is not copied into the store");
    const auth = new ServerAuth(spec, store);
    assert.ok(auth.secrets().includes(registered.client_secret), "the client secret is redacted too");
    oauth.revokeAccessTokens();
    const old = (await auth.token())!;
    const refused = await request(auth, spec.url!, old);
    await auth.onUnauthorized({ response: refused, serverUrl: new URL(spec.url!), fetchFn: auth.fetch });
    assert.equal(oauth.counts.refreshes, 1, "refreshes with the configured client");
  } finally {
    await oauth.close();
  }
});
