/**
 * The dashboard's HTTP face, on a real loopback server over a state dir that this test process publishes
 * into as if it were a serve: login, cookies and tokens, what answers 401, Host and Origin checks,
 * assets and their CSP, live updates, search, health, and answers passed to the serve's inbox.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Activity } from "../../core/observe/activity.ts";
import { ActivityPublisher } from "../../core/observe/activity_file.ts";
import { startUi, type UiServer } from "../../core/dashboard/ui.ts";
import { DashboardAuth } from "../../core/dashboard/auth.ts";
import { idleServeState } from "./_serve_state.ts";

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with exactly the headers given (fetch would set Host and Origin itself). */
function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      res.on("error", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

interface Setup {
  ui: UiServer;
  activity: Activity;
  publisher: ActivityPublisher;
  cookie: string;
  close(): Promise<void>;
}

async function setup(token?: string): Promise<Setup> {
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-dash-"));
  const activity = new Activity();
  const publisher = new ActivityPublisher(stateDir, {
    activity,
    state: () =>
      idleServeState({
        servers: [{ name: "everything", transport: "stdio", state: "ready", restarts: 0, tools: [] }],
        approvals: [{
          id: "req-1",
          session: "stdio",
          server: "memory",
          tool: "delete_entities",
          summary: 'entityNames=["a"]',
          reason: "CODEMODE_CONFIRM_TOOLS asks",
          askedAt: new Date().toISOString(),
          expiresAt: new Date(Date.now() + 60_000).toISOString(),
          client: false,
        }],
      }),
    flushMs: 10,
    stateMs: 50,
  });
  await publisher.start();
  const ui = await startUi({
    stateDir,
    port: 0,
    version: "test",
    token,
    intervalMs: 50,
    search: (
      query,
      limit,
    ) => [{ server: "everything", tool: "echo", description: `q=${query}`, score: limit }],
  });
  const login = await call(ui.loginUrl);
  const cookie = String(login.headers["set-cookie"]).split(";")[0];
  return {
    ui,
    activity,
    publisher,
    cookie,
    async close() {
      await ui.close();
      await publisher.stop();
    },
  };
}

Deno.test("the login code sets an HttpOnly SameSite=Strict cookie, redirects to / and then stops working", async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-dash-"));
  const ui = await startUi({ stateDir, port: 0, version: "test", search: () => [] });
  try {
    assert.match(ui.loginUrl, /^http:\/\/127\.0\.0\.1:\d+\/\?login=[A-Za-z0-9_-]{43}$/);
    const wrong = await call(ui.url + "?login=not-the-code");
    assert.equal(wrong.status, 401);
    const first = await call(ui.loginUrl);
    assert.equal(first.status, 303);
    assert.equal(first.headers.location, "/");
    const cookie = String(first.headers["set-cookie"]);
    assert.match(cookie, /^codemode_ui_[0-9a-f]+=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/$/);
    assert.equal(first.headers["referrer-policy"], "no-referrer");
    const again = await call(ui.loginUrl);
    assert.equal(again.status, 401, "a used code is dead");
    assert.match(again.body, /works once/);
    const page = await call(ui.url, { headers: { cookie: cookie.split(";")[0] } });
    assert.equal(page.status, 200);
  } finally {
    await ui.close();
  }
});

Deno.test("without the cookie, the page, its assets, data, live updates, search and metrics answer 401", async () => {
  const s = await setup();
  try {
    for (const path of ["", "assets/app.js", "api/state", "api/events", "api/search?q=x", "metrics"]) {
      const reply = await call(s.ui.url + path);
      assert.equal(reply.status, 401, path);
      assert.match(reply.body, /Not signed in/, path);
      const forged = await call(s.ui.url + path, { headers: { cookie: `${s.cookie.split("=")[0]}=forged` } });
      assert.equal(forged.status, 401, `${path} with a forged cookie`);
    }
    const answer = await call(s.ui.url + `api/serves/${process.pid}/approvals/a1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"answer":"approve"}',
    });
    assert.equal(answer.status, 401);
    assert.deepEqual(readdirSync(s.publisher.files.inbox), [], "nothing reached the serve");
  } finally {
    await s.close();
  }
});

Deno.test("a foreign Host (DNS rebinding) or a cross-site Origin is refused with 403, even with the cookie", async () => {
  const s = await setup();
  try {
    const port = new URL(s.ui.url).port;
    for (const path of ["", "api/state", "api/events", "healthz", "metrics"]) {
      const host = await call(s.ui.url + path, {
        headers: { cookie: s.cookie, host: `attacker.example:${port}` },
      });
      assert.equal(host.status, 403, path);
      const origin = await call(s.ui.url + path, {
        headers: { cookie: s.cookie, origin: "http://attacker.example" },
      });
      assert.equal(origin.status, 403, path);
      assert.equal(origin.headers["access-control-allow-origin"], undefined);
    }
  } finally {
    await s.close();
  }
});

Deno.test("the page is served with a strict CSP, assets with ETags, and /healthz without login tells nothing private", async () => {
  const s = await setup();
  try {
    const page = await call(s.ui.url, { headers: { cookie: s.cookie } });
    assert.equal(page.status, 200);
    const csp = String(page.headers["content-security-policy"]);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    assert.doesNotMatch(csp, /unsafe/);
    assert.equal(page.headers["x-frame-options"], "DENY");
    for (
      const name of [
        "app.js",
        "runs.js",
        "panels.js",
        "approvals.js",
        "skills.js",
        "format.js",
        "style.css",
        "preact.mjs",
        "hooks.mjs",
        "htm.mjs",
      ]
    ) {
      const asset = await call(s.ui.url + "assets/" + name, { headers: { cookie: s.cookie } });
      assert.equal(asset.status, 200, name);
      const cached = await call(s.ui.url + "assets/" + name, {
        headers: { cookie: s.cookie, "if-none-match": String(asset.headers.etag) },
      });
      assert.equal(cached.status, 304, name);
    }
    assert.equal((await call(s.ui.url + "assets/nope.js", { headers: { cookie: s.cookie } })).status, 404);
    const health = await call(s.ui.url + "healthz");
    assert.equal(health.status, 200);
    const body = JSON.parse(health.body);
    assert.deepEqual(Object.keys(body).sort(), [
      "runtime",
      "serversUp",
      "serves",
      "sessions",
      "status",
      "uptimeSeconds",
      "version",
    ]);
    assert.equal(body.serversUp, 1);
    assert.doesNotMatch(health.body, /everything|\/work/, "no server names or paths");
  } finally {
    await s.close();
  }
});

Deno.test("a page hears new events over server-sent events, after a snapshot of the serves", async () => {
  const s = await setup();
  try {
    let body = "";
    let heard: () => void = () => {};
    const arrived = (text: string) =>
      new Promise<void>((resolve) => (heard = () => body.includes(text) && resolve()));
    const snapshot = arrived("event: snapshot");
    let type = "";
    const req = request(s.ui.url + "api/events", { headers: { cookie: s.cookie } }, (res) => {
      type = String(res.headers["content-type"]);
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        body += chunk;
        heard();
      });
    });
    req.end();
    await snapshot;
    const event = arrived("marker-run");
    s.activity.record({ kind: "run.start", run: "marker-run", session: "s1", code: "print(1)", timeout: 5 });
    await event;
    req.destroy();
    assert.match(type, /^text\/event-stream/);
    assert.match(body, /event: snapshot\ndata: \{"version":"test","mode":"ui","serves":\[\{"pid":\d+/);
    assert.match(body, /event: events\ndata: \{"pid":\d+,"events":\[\{"kind":"run.start","run":"marker-run"/);
  } finally {
    await s.close();
  }
});

Deno.test("search answers JSON hits, and a bad query says what to send", async () => {
  const s = await setup();
  try {
    const ok = await call(s.ui.url + "api/search?q=echo%20it&limit=3", { headers: { cookie: s.cookie } });
    assert.deepEqual(JSON.parse(ok.body).hits[0], {
      server: "everything",
      tool: "echo",
      description: "q=echo it",
      score: 3,
    });
    assert.equal((await call(s.ui.url + "api/search?q=", { headers: { cookie: s.cookie } })).status, 400);
    const limit = await call(s.ui.url + "api/search?q=x&limit=0", { headers: { cookie: s.cookie } });
    assert.equal(limit.status, 400);
    assert.match(JSON.parse(limit.body).error, /Invalid limit "0"/);
  } finally {
    await s.close();
  }
});

Deno.test("an answer given on the page reaches the serve's inbox as a private file, and only a JSON approve or decline", async () => {
  const s = await setup();
  try {
    const url = s.ui.url + `api/serves/${process.pid}/approvals/req-1`;
    const json = { cookie: s.cookie, "content-type": "application/json" };
    const form = await call(url, {
      method: "POST",
      headers: { cookie: s.cookie, "content-type": "application/x-www-form-urlencoded" },
      body: "answer=approve",
    });
    assert.equal(form.status, 415);
    assert.equal((await call(url, { method: "POST", headers: json, body: '{"answer":"yes"}' })).status, 400);
    assert.equal((await call(url, { method: "GET", headers: json })).status, 405);
    const other = await call(s.ui.url + "api/serves/1/approvals/req-1", {
      method: "POST",
      headers: json,
      body: '{"answer":"approve"}',
    });
    assert.equal(other.status, 404);
    const badScope = await call(url, {
      method: "POST",
      headers: json,
      body: '{"answer":"approve","scope":"all"}',
    });
    assert.equal(badScope.status, 400);
    // A question the serve does not say is open (answered, timed out, never asked) is refused with a reason.
    const unknown = await call(s.ui.url + `api/serves/${process.pid}/approvals/req-2`, {
      method: "POST",
      headers: json,
      body: '{"answer":"approve"}',
    });
    assert.equal(unknown.status, 404);
    assert.match(
      JSON.parse(unknown.body).error,
      /No open question "req-2" on serve \d+: it was answered, timed out/,
    );
    assert.deepEqual(readdirSync(s.publisher.files.inbox), []);
    const ok = await call(url, {
      method: "POST",
      headers: json,
      body: '{"answer":"approve","scope":"session"}',
    });
    assert.equal(ok.status, 202);
    const [file] = readdirSync(s.publisher.files.inbox);
    const path = join(s.publisher.files.inbox, file);
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), {
      kind: "approval",
      id: "req-1",
      answer: "approve",
      scope: "session",
      from: "dashboard",
    });
  } finally {
    await s.close();
  }
});

Deno.test("with a token, a bearer header is enough, and a wrong one is refused", async () => {
  const s = await setup("tok-123456");
  try {
    const metrics = await call(s.ui.url + "metrics", { headers: { authorization: "Bearer tok-123456" } });
    assert.equal(metrics.status, 200);
    assert.match(metrics.body, /process_cpu_user_seconds_total/);
    const wrong = await call(s.ui.url + "metrics", { headers: { authorization: "Bearer tok-1234567" } });
    assert.equal(wrong.status, 401);
  } finally {
    await s.close();
  }
});

Deno.test("DashboardAuth: /?token= signs a browser in once per visit; without token or code everything is open", () => {
  const auth = new DashboardAuth({ token: "abc", cookieName: "c" });
  assert.equal(auth.open, false);
  assert.equal(auth.loginWithToken("abd"), undefined);
  const session = auth.loginWithToken("abc")!;
  assert.equal(auth.allows({ cookie: `other=1; c=${session}` }), true);
  assert.equal(auth.allows({ cookie: "c=nope" }), false);
  assert.equal(auth.login("anything"), undefined, "a token-only dashboard has no login code");
  const open = new DashboardAuth({ cookieName: "c" });
  assert.equal(open.open, true);
  assert.equal(open.allows({}), true);
});
