/**
 * OAuth for remote MCP servers, end to end: a local OAuth-protected MCP server (authorization server with
 * dynamic registration, resource server checking token and audience), `codemode auth login` driven by a
 * fetch "browser", then a real `codemode serve` under the SDK client, with sandbox code on podman calling
 * the server while its tokens expire, get revoked and are renewed. The tests run in order and share one
 * HOME, one OAuth server and one serve. The last one sweeps everything codemode printed, logged or
 * answered for every token the server ever issued.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { podman } from "../../plugins/runtime/podman.ts";
import { type OAuthTestServer, startOAuthServer } from "../testdata/servers/oauth_server.ts";
import { type Answer, fakeHome, runWithin, serve, type Served } from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { approveWithoutFollowing, cli, cliLogin, type CliRun } from "./_oauth.ts";
import { TokenStore } from "../../core/auth/token_store.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED the serve part of the OAuth tests: podman or image ${TEST_IMAGE} missing`);

const oauth: OAuthTestServer = await startOAuthServer();
const staticToken = oauth.mint(oauth.mcpUrl);
const home = fakeHome({
  secure: { type: "http", url: oauth.mcpUrl },
  other: { type: "http", url: oauth.otherUrl },
  evil: { type: "http", url: oauth.evilUrl },
  fixed: { type: "http", url: oauth.mcpUrl, headers: { Authorization: `Bearer ${staticToken}` } },
});
const stateDir = join(home, "state");
const env = { HOME: home, CODEMODE_STATE_DIR: stateDir, CODEMODE_LOG_LEVEL: "debug" };
const store = new TokenStore(stateDir);
/** Everything codemode printed, logged or answered: swept for tokens at the end. */
const outputs: string[] = [];
const answers: Answer[] = [];
let served: Served | undefined;
let serveLog = "";

function keep(run: CliRun): CliRun {
  outputs.push(run.stdout, run.stderr);
  return run;
}

async function session(): Promise<Served> {
  if (!served) {
    served = await serve({ ...env, CODEMODE_RUNTIME: "podman", CODEMODE_TIMEOUT: "60" }, home);
    served.transport.stderr?.on("data", (d) => (serveLog += d));
  }
  return served;
}

async function run(code: string, timeout = 60): Promise<Answer> {
  const answer = await runWithin(await session(), code, timeout, timeout * 1000 + 60_000);
  answers.push(answer);
  return answer;
}

/** The findings a run printed as its last stdout line of JSON. */
function found(answer: Answer): Record<string, unknown> {
  const line = String(answer.structured.stdout ?? "").trim().split("\n").at(-1) ?? "";
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`no JSON findings: ${answer.text.slice(0, 1500)}`);
  }
}

const test = (name: string, fn: () => Promise<void>, needsServe = false) =>
  Deno.test({ name, ignore: needsServe && !usable, sanitizeOps: false, sanitizeResources: false, fn });

test("auth login --no-browser logs in through the authorize page; a redirect with a wrong state is refused", async () => {
  let forged: Response | undefined;
  let exchangesBeforeGenuine = -1;
  const login = keep(
    await cliLogin("secure", env, async (authorizeUrl) => {
      const callback = await approveWithoutFollowing(authorizeUrl);
      const wrong = new URL(callback);
      wrong.searchParams.set("state", "forged-state-value");
      forged = await fetch(wrong);
      await forged.body?.cancel();
      exchangesBeforeGenuine = oauth.counts.codeExchanges;
      const genuine = await fetch(callback);
      assert.equal(genuine.status, 200, await genuine.text());
    }),
  ) as CliRun & { authorizeUrl: string };
  assert.equal(login.code, 0, login.stderr);
  assert.match(login.stdout, /Logged in to "secure" \(scopes: mcp:read mcp:write/);
  assert.equal(forged?.status, 400, "a callback with a state that is not the login's is refused");
  assert.equal(exchangesBeforeGenuine, 0, "the refused callback's code was not exchanged");
  assert.match(login.stderr, /state that is not this login's; it was refused/);
  const sent = new URL(login.authorizeUrl).searchParams;
  assert.equal(sent.get("code_challenge_method"), "S256");
  assert.ok(sent.get("code_challenge"), "PKCE challenge sent");
  assert.equal(sent.get("resource"), oauth.mcpUrl, "RFC 8707 resource sent");
  assert.match(sent.get("redirect_uri") ?? "", /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
  assert.equal(oauth.counts.registrations, 1, "registered dynamically");
  assert.equal(oauth.counts.codeExchanges, 1);

  const file = store.pathFor("secure", oauth.mcpUrl);
  assert.equal(statSync(file).mode & 0o777, 0o600, "the token file is 0600");
  assert.equal(statSync(store.dir).mode & 0o777, 0o700, "its folder is 0700");
  const stored = readFileSync(file, "utf8");
  assert.ok(
    oauth.issued().some((t) => stored.includes(t)),
    "the file holds the tokens (the sweep can find them)",
  );
});

test("a login is refused for a server whose metadata names another resource (wrong audience)", async () => {
  const before = { ...oauth.counts };
  const login = keep(await cliLogin("evil", env, () => Promise.reject(new Error("must not get this far"))));
  assert.equal(login.code, 1, login.stdout + login.stderr);
  assert.match(login.stderr, /login to "evil" failed: .*does not match/i);
  assert.equal(oauth.counts.authorizations, before.authorizations, "no authorization was started");
  assert.equal(oauth.counts.registrations, before.registrations, "no client was registered");
  assert.equal(await store.read("evil", oauth.evilUrl), undefined, "nothing was stored");

  // And the resource server itself refuses a token issued for another resource.
  const response = await fetch(oauth.mcpUrl, {
    method: "POST",
    headers: { authorization: `Bearer ${oauth.mint(oauth.otherUrl)}`, "content-type": "application/json" },
    body: "{}",
  });
  await response.body?.cancel();
  assert.equal(response.status, 401);
  assert.match(response.headers.get("www-authenticate") ?? "", /not issued for this resource/);
});

test("auth status --json lists each remote OAuth server with loggedIn, expiresAt and scopes", async () => {
  const status = keep(await cli(["auth", "status", "--json"], env));
  assert.equal(status.code, 0, status.stderr);
  const rows = JSON.parse(status.stdout) as Record<string, unknown>[];
  assert.deepEqual(
    rows.map((r) => r.server).sort(),
    ["evil", "other", "secure"],
    "fixed sends its own header",
  );
  const secure = rows.find((r) => r.server === "secure")!;
  assert.deepEqual(Object.keys(secure).sort(), ["expiresAt", "loggedIn", "scopes", "server"]);
  assert.equal(secure.loggedIn, true);
  assert.ok(Date.parse(String(secure.expiresAt)) > Date.now());
  assert.deepEqual(secure.scopes, ["mcp:read", "mcp:write"]);
  assert.deepEqual(rows.find((r) => r.server === "other"), {
    server: "other",
    loggedIn: false,
    expiresAt: null,
    scopes: [],
  });
});

test("servers --json probes each HTTP server for its auth state; stdio servers have none", async () => {
  const listed = keep(await cli(["servers", "--json"], env));
  const rows = JSON.parse(listed.stdout).servers as { name: string; auth?: string }[];
  const auth = Object.fromEntries(rows.map((r) => [r.name, r.auth]));
  assert.deepEqual(auth, {
    everything: undefined,
    memory: undefined,
    secure: "logged-in",
    other: "needs-login",
    evil: "needs-login",
    fixed: "none",
  });
  const table = keep(await cli(["servers"], env));
  assert.match(table.stdout, /needs a login: codemode auth login other/);
});

test("sandbox code lists and calls the tools of the OAuth server", async () => {
  const answer = await run(`
import json
from mcp import runtime
tools = sorted(t["tool"] for t in await runtime.list_tools("secure"))
echoed = await mcp_secure.echo(message="through oauth")
who = await mcp_secure.whoami()
print(json.dumps({"tools": tools, "echoed": echoed, "who": who}))`);
  const f = found(answer);
  assert.deepEqual(f.tools, ["auth_error", "echo", "fail", "whoami"]);
  assert.equal(f.echoed, "through oauth");
  assert.deepEqual((f.who as { scopes: string[] }).scopes, ["mcp:read", "mcp:write"]);
  assert.equal((f.who as { resource: string }).resource, oauth.mcpUrl);
}, true);

test("short-lived tokens are refreshed before they expire, mid-session, with no failed call", async () => {
  oauth.setAccessTokenTtl(5);
  oauth.revokeAccessTokens(); // the next call gets a 401 and refreshes into 5-second tokens
  await run(`await mcp_secure.echo(message="renew")`);
  const before = { ...oauth.counts };
  const answer = await run(`
import asyncio, json
results = []
for i in range(6):
    results.append(await mcp_secure.echo(message=f"call {i}"))
    await asyncio.sleep(2)
print(json.dumps(results))`);
  assert.equal(answer.isError, false, answer.text);
  assert.deepEqual(found(answer), [0, 1, 2, 3, 4, 5].map((i) => `call ${i}`));
  assert.ok(
    oauth.counts.refreshes - before.refreshes >= 2,
    `refreshed ${oauth.counts.refreshes - before.refreshes}x`,
  );
  assert.equal(
    oauth.counts.unauthorized,
    before.unauthorized,
    "refreshed before expiry: no request was refused",
  );
}, true);

test("after a 401, ten concurrent calls share one refresh and none fails", async () => {
  oauth.setAccessTokenTtl(3600);
  oauth.revokeAccessTokens();
  await run(`await mcp_secure.echo(message="long-lived again")`);
  oauth.revokeAccessTokens(); // unknown to codemode: its token still looks valid for an hour
  const before = { ...oauth.counts };
  const answer = await run(`
import asyncio, json
print(json.dumps(await asyncio.gather(*[mcp_secure.echo(message=f"n{i}") for i in range(10)])))`);
  assert.equal(answer.isError, false, answer.text);
  assert.deepEqual(found(answer), [...Array(10).keys()].map((i) => `n${i}`));
  assert.equal(oauth.counts.refreshes - before.refreshes, 1, "one refresh for all ten");
  assert.ok(oauth.counts.unauthorized > before.unauthorized, "the revoked token was refused first");
}, true);

test(
  "a revoked refresh token gives a clear needs-login error at once; the server keeps answering",
  async () => {
    oauth.revokeRefreshTokens();
    oauth.revokeAccessTokens();
    const call = `
import json, time
t = time.monotonic()
try:
    await mcp_secure.echo(message="x")
    outcome = "answered"
except Exception as e:
    outcome = {"type": type(e).__name__, "message": str(e)}
print(json.dumps({"outcome": outcome, "ms": (time.monotonic() - t) * 1000}))`;
    const first = found(await run(call));
    const failed = first.outcome as { type: string; message: string };
    assert.equal(failed.type, "PermissionError", JSON.stringify(first));
    assert.match(
      failed.message,
      /MCP server "secure" needs a login: .*refused the refresh token.*codemode auth login secure/,
    );
    assert.ok(Number(first.ms) < 10_000, `took ${first.ms} ms`);

    const asked = { ...oauth.counts };
    const second = found(await run(call));
    assert.equal((second.outcome as { type: string }).type, "PermissionError");
    assert.match((second.outcome as { message: string }).message, /codemode auth login secure/);
    assert.ok(Number(second.ms) < 2_000, `the second call took ${second.ms} ms`);
    assert.equal(oauth.counts.mcpRequests, asked.mcpRequests, "the second call did not reach the server");
    assert.equal(oauth.counts.refreshFailures, asked.refreshFailures, "nor the authorization server");

    const alive = found(
      await run(`
import json
print(json.dumps({"echo": await mcp_everything.echo(message="still here"), "fixed": await mcp_fixed.echo(message="static")}))`),
    );
    assert.match(String(alive.echo), /still here/);
    assert.equal(alive.fixed, "static", "the server with its own Authorization header works as before");

    const status = JSON.parse(keep(await cli(["auth", "status", "--json"], env)).stdout) as {
      server: string;
      loggedIn: boolean;
    }[];
    assert.equal(
      status.find((r) => r.server === "secure")?.loggedIn,
      false,
      "the refused tokens were dropped",
    );
  },
  true,
);

test("logging in again while serve runs makes the server usable without a restart", async () => {
  const login = keep(await cliLogin("secure", env));
  assert.equal(login.code, 0, login.stderr);
  assert.equal(oauth.counts.registrations, 1, "the dynamic registration was reused");
  const answer = await run(`print(await mcp_secure.echo(message="back"))`);
  assert.equal(String(answer.structured.stdout).trim(), "back", answer.text);
}, true);

test(
  "a server not logged in fails at once naming its login command; no other server's token reaches it",
  async () => {
    const answer = found(
      await run(`
import json
try:
    await mcp_other.echo(message="x")
    print(json.dumps("answered"))
except PermissionError as e:
    print(json.dumps(str(e)))`),
    );
    assert.match(String(answer), /MCP server "other" needs a login: .*run `codemode auth login other`/);
    const secureTokens = new Set(oauth.issued());
    const carried = oauth.requests().filter((r) => r.path === "/other/mcp" && r.token !== null);
    assert.deepEqual(
      carried.filter((r) => secureTokens.has(r.token!)),
      [],
      "no token was sent to another server",
    );
  },
  true,
);

test("a tool error quoting the request's credentials reaches sandbox code redacted", async () => {
  const answer = found(
    await run(`
import json
try:
    await mcp_secure.auth_error()
except Exception as e:
    print(json.dumps({"type": type(e).__name__, "message": str(e)}))`),
  );
  assert.equal(answer.type, "ToolError");
  assert.match(String(answer.message), /rejected credentials: Bearer \[redacted\]/);
}, true);

test("doctor shows which servers need a login and the command; stats run alongside", async () => {
  const quick = keep(await cli(["doctor", "--quick", "--json"], env));
  const report = JSON.parse(quick.stdout) as {
    servers: { name: string; auth?: string; status: string; problem?: { fix?: string } }[];
    findings: { subject: string; fix?: string }[];
  };
  const other = report.servers.find((s) => s.name === "other")!;
  assert.equal(other.auth, "needs-login");
  assert.equal(other.status, "warn");
  assert.match(other.problem?.fix ?? "", /codemode auth login other/);
  assert.equal(report.servers.find((s) => s.name === "secure")?.auth, "logged-in");
  assert.ok(
    report.findings.some((f) => f.subject === "server other" && /auth login other/.test(f.fix ?? "")),
  );
  const full = keep(await cli(["doctor"], env));
  assert.match(full.stdout, /other.*needs a login: `codemode auth login other`/);
  assert.match(full.stdout, /server other: MCP server "other" needs a login/);
  if (usable) keep(await cli(["stats", "--json"], env));
});

test("auth logout revokes the tokens at the server and deletes them; the serve then needs a login", async () => {
  const before = oauth.counts.revocations;
  const logout = keep(await cli(["auth", "logout", "secure"], env));
  assert.equal(logout.code, 0, logout.stderr);
  assert.match(logout.stdout, /Logged out of "secure": 2 tokens revoked and the stored credentials deleted/);
  assert.equal(oauth.counts.revocations - before, 2);
  assert.equal(await store.read("secure", oauth.mcpUrl), undefined);
  const again = keep(await cli(["auth", "logout", "secure"], env));
  assert.match(again.stdout, /Not logged in to "secure"/);
  if (!usable) return;
  const answer = found(
    await run(`
import json
try:
    await mcp_secure.echo(message="x")
    print(json.dumps("answered"))
except PermissionError as e:
    print(json.dumps(str(e)))`),
  );
  assert.match(String(answer), /codemode auth login secure/);
});

test("no token string appears in any log line, sandbox-visible value, CLI output, error or dashboard event", async () => {
  // What the dashboard shows (`codemode ui`): the serve's activity files, read before it stops and removes them.
  const dashboard: string[] = [];
  try {
    if (served) {
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // past the publisher's flush and state intervals
      const dir = join(stateDir, "activity");
      for (const name of readdirSync(dir)) {
        if (/\.jsonl?$/.test(name)) dashboard.push(readFileSync(join(dir, name), "utf8"));
      }
      await served.close();
    }
  } finally {
    await oauth.close();
  }
  const tokens = oauth.issued();
  assert.ok(tokens.length >= 8, `${tokens.length} tokens issued`);
  const texts = [
    ...outputs,
    ...answers.map((a) => a.text + JSON.stringify(a.structured)),
    serveLog,
    ...dashboard,
  ];
  if (usable) {
    assert.match(serveLog, /oauth tokens refreshed/, "the serve's debug log was captured");
    assert.match(
      dashboard.join("\n"),
      /"kind":"tool.call".*"server":"secure"/,
      "the dashboard's events were captured",
    );
    assert.match(
      dashboard.join("\n"),
      /codemode auth login secure/,
      "with the calls that failed for want of a login",
    );
    assert.ok(answers.length >= 8);
  }
  const unformatted = serveLog.split("\n").filter((line) => line.trim() && !line.startsWith("{"));
  assert.deepEqual(unformatted, [], "the serve's stderr carries JSON log lines only (SDK notes included)");
  const leaks = tokens.filter((token) => texts.some((text) => text.includes(token)));
  assert.deepEqual(leaks.map((t) => t.slice(0, 6) + "..."), [], "tokens appear in output");
  // The static header's token is the user's own: it stays out of everything too.
  assert.ok(!texts.some((text) => text.includes(staticToken)));
});
