/**
 * Attacks on the dashboard (`codemode ui`, and what every serve publishes for it), each named, each a
 * real request or a real file written as another local user: a web page on another origin using the
 * user's cookie, DNS rebinding, stolen or reused login codes, requests without the cookie, forged
 * cookies, and files planted by another user to show a fake serve or to answer for the user.
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import {
  activityDir,
  activityFiles,
  ActivityInbox,
  type InboxMessage,
} from "../../core/observe/activity_file.ts";

/** What an attack may use. */
export interface DashboardCtx {
  /** The dashboard's address, "http://127.0.0.1:PORT/". */
  url: string;
  /** A valid session cookie ("name=value"). */
  cookie: string;
  /** The login URL, already used once. */
  usedLoginUrl: string;
  stateDir: string;
  /** The pid of the stdio serve the dashboard shows. */
  servePid: number;
  /** The pid of `codemode ui` (alive, so a file claiming it passes the liveness check). */
  uiPid: number;
  /** A local user that is not us (for planted files), when the machine has one. */
  otherUser?: string;
}

/** One attack and what must hold. */
export interface DashboardAttack {
  name: string;
  /** Needs another local user. */
  otherUser?: true;
  run(ctx: DashboardCtx): Promise<void>;
}

/** A raw exchange, so an attack can send the headers a browser on another site would. */
export function send(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      let body = "";
      const done = () => resolve({ status: res.statusCode!, headers: res.headers, body });
      res.on("data", (d) => {
        body += d;
        // Event streams never end: a first chunk is enough to judge.
        if (String(res.headers["content-type"]).startsWith("text/event-stream")) {
          res.destroy();
          done();
        }
      });
      res.on("end", done).on("error", done);
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const DATA_PATHS = ["", "api/state", "api/events", "api/search?q=echo", "metrics", "assets/app.js"];

/** Runs `script` with sh as `user`. */
function asUser(user: string, script: string): void {
  execFileSync("runuser", ["-u", user, "--", "sh", "-c", script], { stdio: "pipe" });
}

/** Lets `user` into the state dir's activity folder, as a careless chmod would; returns the undo. */
function loosen(ctx: DashboardCtx, ...extra: string[]): () => void {
  const dirs = [join(ctx.stateDir, ".."), ctx.stateDir];
  for (const dir of dirs) chmodSync(dir, 0o711);
  const open = [activityDir(ctx.stateDir), ...extra];
  for (const dir of open) chmodSync(dir, 0o777);
  return () => {
    for (const dir of [...open, ...dirs]) if (existsSync(dir)) chmodSync(dir, 0o700);
  };
}

/** The dashboard attacks. */
export const dashboardAttacks: DashboardAttack[] = [
  {
    name: "a page on another origin cannot read the data with the user's cookie (no CORS, Origin refused)",
    async run(ctx) {
      for (const path of DATA_PATHS) {
        const r = await send(ctx.url + path, {
          headers: { cookie: ctx.cookie, origin: "https://evil.example" },
        });
        assert.equal(r.status, 403, path);
        assert.equal(r.headers["access-control-allow-origin"], undefined, path);
        assert.doesNotMatch(r.body, /run_python|codemode-tests|"sessions"/, path);
      }
    },
  },
  {
    name: "a page on another origin cannot answer an approval, not even as a plain form post",
    async run(ctx) {
      const url = `${ctx.url}api/serves/${ctx.servePid}/approvals/x1`;
      const cross = await send(url, {
        method: "POST",
        headers: { cookie: ctx.cookie, origin: "https://evil.example", "content-type": "application/json" },
        body: '{"answer":"approve"}',
      });
      assert.equal(cross.status, 403);
      // A form needs no CORS preflight; without an Origin header (some browsers omit it) it is still refused.
      const form = await send(url, {
        method: "POST",
        headers: { cookie: ctx.cookie, "content-type": "application/x-www-form-urlencoded" },
        body: "answer=approve",
      });
      assert.equal(form.status, 415);
      assert.deepEqual(readdirSync(activityFiles(ctx.stateDir, ctx.servePid).inbox), []);
    },
  },
  {
    name: "DNS rebinding: a foreign Host is refused on every path, a valid login code included",
    async run(ctx) {
      const port = new URL(ctx.url).port;
      for (const path of [...DATA_PATHS, "healthz"]) {
        const r = await send(ctx.url + path, {
          headers: { host: `rebind.evil.example:${port}`, cookie: ctx.cookie },
        });
        assert.equal(r.status, 403, path);
      }
      const login = await send(ctx.usedLoginUrl, { headers: { host: `rebind.evil.example:${port}` } });
      assert.equal(login.status, 403);
      assert.equal(login.headers["set-cookie"], undefined);
    },
  },
  {
    name: "a login code works once; replayed or guessed codes get no cookie",
    async run(ctx) {
      const replay = await send(ctx.usedLoginUrl);
      assert.equal(replay.status, 401);
      assert.equal(replay.headers["set-cookie"], undefined);
      for (
        const guess of ["", "a", "x".repeat(43), new URL(ctx.usedLoginUrl).searchParams.get("login")! + "A"]
      ) {
        const r = await send(`${ctx.url}?login=${encodeURIComponent(guess)}`);
        assert.equal(r.status, 401, guess);
        assert.equal(r.headers["set-cookie"], undefined, guess);
      }
    },
  },
  {
    name: "without the cookie, the live stream and every data endpoint answer 401 and show nothing",
    async run(ctx) {
      for (const path of DATA_PATHS) {
        const r = await send(ctx.url + path);
        assert.equal(r.status, 401, path);
        assert.doesNotMatch(r.body, /codemode-tests|run_python|"servers"|import /, path);
      }
      const post = await send(`${ctx.url}api/serves/${ctx.servePid}/approvals/x2`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"answer":"approve"}',
      });
      assert.equal(post.status, 401);
    },
  },
  {
    name: "a forged cookie, or the right value under another name, is refused",
    async run(ctx) {
      const [name, value] = ctx.cookie.split("=");
      for (
        const cookie of [
          `${name}=${"A".repeat(43)}`,
          `${name}=`,
          `codemode_ui_0=${value}`,
          `${name}=${value}x`,
        ]
      ) {
        assert.equal((await send(ctx.url + "api/state", { headers: { cookie } })).status, 401, cookie);
      }
    },
  },
  {
    name: "the page cannot be framed and never sends the login code on in a Referer",
    async run(ctx) {
      const page = await send(ctx.url, { headers: { cookie: ctx.cookie } });
      assert.equal(page.headers["x-frame-options"], "DENY");
      assert.match(String(page.headers["content-security-policy"]), /frame-ancestors 'none'/);
      assert.equal(page.headers["referrer-policy"], "no-referrer");
      const login = await send(ctx.usedLoginUrl);
      assert.equal(login.headers["referrer-policy"], "no-referrer");
    },
  },
  {
    name:
      "another local user cannot plant a fake serve, or a link to the user's files, for the dashboard to show",
    otherUser: true,
    async run(ctx) {
      const undo = loosen(ctx);
      const fake = activityFiles(ctx.stateDir, ctx.uiPid);
      const secret = join(ctx.stateDir, "secret-notes.txt");
      writeFileSync(secret, '{"kind":"run.start","seq":1,"run":"stolen","code":"the user\'s secret"}\n', {
        mode: 0o600,
      });
      try {
        const state = JSON.stringify({
          pid: ctx.uiPid,
          transport: "stdio",
          startedAt: "x",
          sessions: [],
          servers: [],
        });
        asUser(
          ctx.otherUser!,
          `printf '%s' '${state}' > ${fake.state} && chmod 600 ${fake.state} && ` +
            `printf '%s\\n' '{"kind":"run.start","seq":1,"run":"planted","code":"planted"}' > ${fake.events} && ` +
            `ln -s ${secret} ${fake.rotated}`,
        );
        const r = await send(ctx.url + "api/state", { headers: { cookie: ctx.cookie } });
        assert.equal(r.status, 200);
        const pids = (JSON.parse(r.body).serves as { pid: number }[]).map((s) => s.pid);
        assert.ok(!pids.includes(ctx.uiPid), "the planted serve is not shown");
        assert.ok(pids.includes(ctx.servePid), "the real serve still is");
        assert.doesNotMatch(r.body, /planted|stolen|secret/);
      } finally {
        for (const path of [fake.state, fake.events, fake.rotated]) execFileSync("rm", ["-f", path]);
        undo();
      }
    },
  },
  {
    name: "another local user's answer dropped in a serve's inbox is refused and removed",
    otherUser: true,
    async run(ctx) {
      const inboxDir = activityFiles(ctx.stateDir, ctx.servePid).inbox;
      const undo = loosen(ctx, inboxDir);
      // The serve's side of the channel, as a serve waiting for an answer runs it.
      const inbox = new ActivityInbox(ctx.stateDir, { pid: ctx.servePid, intervalMs: 60_000 });
      const heard: InboxMessage[] = [];
      const off = inbox.on("approval", (m) => void heard.push(m));
      try {
        const forged = join(inboxDir, "forged.json");
        asUser(
          ctx.otherUser!,
          `printf '%s' '{"kind":"approval","id":"x3","answer":"approve"}' > ${forged} && chmod 600 ${forged}`,
        );
        assert.ok(existsSync(forged), "the other user could write the file (the folder was loosened)");
        await inbox.poll();
        assert.deepEqual(heard, [], "the forged answer was not obeyed");
        assert.equal(existsSync(forged), false, "and it was removed");
      } finally {
        off();
        undo();
      }
    },
  },
];

/** A local user other than us that can run commands, if the machine has one (setup.sh makes one). */
export function otherLocalUser(): string | undefined {
  const user = process.env.CODEMODE_ROOTLESS_USER ?? "codemode-rootless";
  try {
    execFileSync("id", ["-u", user], { stdio: "pipe" });
    return process.getuid?.() === 0 ? user : undefined;
  } catch {
    return undefined;
  }
}
