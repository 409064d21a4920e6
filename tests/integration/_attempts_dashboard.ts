/**
 * Attacks on the dashboard (`codemode ui`, and what every serve publishes for it), each named, each a
 * real request or a real file written as another local user: a web page on another origin using the
 * user's cookie, DNS rebinding, stolen or reused login codes, requests without the cookie, forged
 * cookies, files planted by another user to show a fake serve or to answer for the user, path traversal
 * in the names of run images and artifacts, other sessions' and other users' artifacts, SVG and HTML
 * displays that try to run script, and forged answers to a real pending approval.
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import type { RunEndEvent } from "../../core/observe/activity.ts";
import { sessionArtifactsDir } from "../../core/artifacts/stores.ts";
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
  /** Runs code in the serve (its client cannot be asked for approvals; memory/delete_entities asks). */
  run(code: string): Promise<{ text: string; isError: boolean; structured: Record<string, unknown> }>;
  /** Where server-memory keeps its graph. */
  memoryFile: string;
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
        // "secret" alone is ordinary vocabulary (a metric's help names secrets); the file's text is not.
        assert.doesNotMatch(r.body, /planted|stolen|the user's secret|secret-notes/);
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

/** What the dashboard shows of serve `pid`, with the cookie. */
async function serveView(
  ctx: DashboardCtx,
): Promise<{ state: Record<string, unknown>; events: RunEndEvent[] }> {
  const r = await send(ctx.url + "api/state", { headers: { cookie: ctx.cookie } });
  const serve =
    (JSON.parse(r.body).serves as { pid: number; state: Record<string, unknown>; events: RunEndEvent[] }[])
      .find((s) => s.pid === ctx.servePid)!;
  return serve;
}

/** The last run end that displayed or produced something: its image file and its artifact's tail. */
async function lastOutputs(ctx: DashboardCtx): Promise<{ image: string; artifact: string; session: string }> {
  const { events } = await serveView(ctx);
  const end = events.filter((e) => e.kind === "run.end" && e.artifacts?.length).at(-1)!;
  const image = end.displays!.find((d) => d.file)!.file!;
  const tail = end.artifacts![0].uri.slice("codemode://artifacts/".length);
  return { image, artifact: tail, session: tail.split("/")[0] };
}

/** Polls `check` for up to `ms`. */
async function until(check: () => Promise<boolean>, ms = 20_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return await check();
}

/** Attacks on the files a dashboard hands out, and on approvals answered from the page. */
export const dashboardFileAttacks: DashboardAttack[] = [
  {
    name: "path traversal in the names of run images and artifacts reads nothing outside them",
    async run(ctx) {
      const { image, session } = await lastOutputs(ctx);
      const base = `${ctx.url}api/serves/${ctx.servePid}/`;
      const planted = join(ctx.stateDir, "planted-secret.txt");
      writeFileSync(planted, "planted secret of the user", { mode: 0o600 });
      const names = [
        `displays/..%2F${ctx.servePid}.json`,
        `displays/%2e%2e%2f%2e%2e%2fplanted-secret.txt`,
        `displays/${image}%2F..%2F..%2F${ctx.servePid}.json`,
        `displays/../../${ctx.servePid}.json`,
        `displays/${image.replace(".png", ".json")}`,
        `displays/%2Fetc%2Fpasswd`,
        `artifacts/${session}/..%2F..%2F..%2F..%2Fplanted-secret.txt`,
        `artifacts/${session}/..%2F..%2F..%2F..%2F..%2Factivity%2F${ctx.servePid}.json`,
        `artifacts/${session}/%2Fetc%2Fpasswd`,
        `artifacts/${session}/..%5C..%5Cplanted-secret.txt`,
        `artifacts/..%2F..%2Fplanted-secret.txt`,
        `artifacts/${session}/../../../planted-secret.txt`,
        `artifacts/${session}/.hidden`,
      ];
      for (const name of names) {
        const r = await send(base + name, { headers: { cookie: ctx.cookie } });
        assert.ok([400, 404].includes(r.status), `${name}: ${r.status}`);
        assert.doesNotMatch(r.body, /planted secret|root:x:0|"servers"|"policy"/, name);
      }
      // The real files are served, so the refusals above were the checks at work.
      assert.equal((await send(base + `displays/${image}`, { headers: { cookie: ctx.cookie } })).status, 200);
    },
  },
  {
    name: "another session's or another serve's artifacts cannot be downloaded, nor a file another user owns",
    async run(ctx) {
      const { artifact, session } = await lastOutputs(ctx);
      const path = artifact.slice(session.length + 1);
      const own = `${ctx.url}api/serves/${ctx.servePid}/artifacts/${artifact}`;
      assert.equal(
        (await send(own, { headers: { cookie: ctx.cookie } })).status,
        200,
        "the serve's own artifact",
      );
      // The same session id under another live process (the ui), and a made-up session of this serve.
      const elsewhere = await send(`${ctx.url}api/serves/${ctx.uiPid}/artifacts/${artifact}`, {
        headers: { cookie: ctx.cookie },
      });
      assert.equal(elsewhere.status, 404);
      const guessed = await send(
        `${ctx.url}api/serves/${ctx.servePid}/artifacts/${"f".repeat(32)}/${path}`,
        { headers: { cookie: ctx.cookie } },
      );
      assert.equal(guessed.status, 404);
      assert.doesNotMatch(guessed.body + elsewhere.body, /artifact of the user/);
      if (!ctx.otherUser) return;
      // The artifact's file handed to another user (as a planted one would be): refused, not read.
      const file = join(sessionArtifactsDir(ctx.stateDir, ctx.servePid, session), "files", path);
      const { uid, gid } = statSync(file);
      const other = Number(execFileSync("id", ["-u", ctx.otherUser]).toString().trim());
      chownSync(file, other, gid);
      try {
        const r = await send(own, { headers: { cookie: ctx.cookie } });
        assert.equal(r.status, 403);
        assert.doesNotMatch(r.body, /artifact of the user/);
      } finally {
        chownSync(file, uid, gid);
      }
    },
  },
  {
    name: "an SVG or HTML display that carries script is kept as text, never served as a file or a page",
    async run(ctx) {
      const r = await ctx.run(`# script in displays
class Svg:
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
class Page:
    def _repr_html_(self):
        return '<script>fetch("/api/state")</script><img src=x onerror=alert(3)>'
display(Svg())
display(Page())`);
      assert.equal(r.isError, false, r.text);
      let end: RunEndEvent | undefined;
      await until(async () => {
        end = (await serveView(ctx)).events.filter((e) => e.kind === "run.end").at(-1);
        return Boolean(end?.displays?.some((d) => d.mimeType === "text/html"));
      });
      assert.deepEqual(end!.displays!.map((d) => [d.mimeType, d.file]), [
        ["image/svg+xml", undefined],
        ["text/html", undefined],
      ]);
      assert.match(
        end!.displays![0].text!,
        /<script>alert\(2\)<\/script>/,
        "kept as text for the page to escape",
      );
      for (const ext of ["svg", "html", "png", "jpg"]) {
        for (let i = 0; i < 2; i++) {
          const name = `${end!.seq}-${i}.${ext}`;
          const f = await send(`${ctx.url}api/serves/${ctx.servePid}/displays/${name}`, {
            headers: { cookie: ctx.cookie },
          });
          assert.equal(f.status, 404, name);
          assert.doesNotMatch(String(f.headers["content-type"]), /html|svg|image/, name);
        }
      }
    },
  },
  {
    name:
      "a forged answer to a pending approval (no cookie, another origin, a form, a made-up id) does not approve it; the page's answer does, once",
    async run(ctx) {
      await ctx.run(
        `await mcp_memory.create_entities(entities=[{"name": "keep-me", "entityType": "t", "observations": ["x"]}])`,
      );
      // A page watching the serve: its client cannot be asked, so the question waits for the page.
      const watching = request(ctx.url + "api/events", { headers: { cookie: ctx.cookie } });
      watching.on("error", () => {});
      watching.end();
      try {
        await new Promise((r) => setTimeout(r, 500));
        const call = ctx.run(`try:
    await mcp_memory.delete_entities(entityNames=["keep-me"])
    out = "deleted"
except PermissionError as e:
    out = str(e)
out`);
        let id = "";
        assert.ok(
          await until(async () => {
            const approvals = (await serveView(ctx)).state.approvals as { id: string; client: boolean }[];
            id = approvals?.[0]?.id ?? "";
            return Boolean(id);
          }),
          "the question is published",
        );
        const url = `${ctx.url}api/serves/${ctx.servePid}/approvals/${id}`;
        const body = '{"answer":"approve"}';
        const json = "application/json";
        const forged: { headers: Record<string, string>; status: number }[] = [
          { headers: { "content-type": json }, status: 401 },
          {
            headers: { cookie: ctx.cookie, "content-type": json, origin: "https://evil.example" },
            status: 403,
          },
          { headers: { cookie: ctx.cookie, "content-type": "text/plain" }, status: 415 },
          {
            headers: { cookie: ctx.cookie, "content-type": "application/x-www-form-urlencoded" },
            status: 415,
          },
          { headers: { authorization: "Bearer guessed", "content-type": json }, status: 401 },
        ];
        for (const f of forged) {
          const r = await send(url, { method: "POST", headers: f.headers, body });
          assert.equal(r.status, f.status, JSON.stringify(f.headers));
        }
        const madeUp = await send(`${ctx.url}api/serves/${ctx.servePid}/approvals/not-${id}`, {
          method: "POST",
          headers: { cookie: ctx.cookie, "content-type": json },
          body,
        });
        assert.equal(madeUp.status, 404);
        assert.match(JSON.parse(madeUp.body).error, /No open question/);
        await new Promise((r) => setTimeout(r, 600));
        assert.equal(((await serveView(ctx)).state.approvals as unknown[]).length, 1, "still waiting");
        assert.match(readFileSync(ctx.memoryFile, "utf8"), /keep-me/);
        const declined = await send(url, {
          method: "POST",
          headers: { cookie: ctx.cookie, "content-type": json },
          body: '{"answer":"decline"}',
        });
        assert.equal(declined.status, 202);
        const answer = await call;
        assert.equal(answer.structured.value, `'Call to "memory/delete_entities" declined by the user'`);
        assert.match(readFileSync(ctx.memoryFile, "utf8"), /keep-me/, "the tool was never called");
        await until(async () => !((await serveView(ctx)).state.approvals as unknown[]).length, 5000);
        const late = await send(url, {
          method: "POST",
          headers: { cookie: ctx.cookie, "content-type": json },
          body,
        });
        assert.equal(late.status, 404, "an answer to a closed question is refused");
        assert.match(JSON.parse(late.body).error, /it was answered, timed out/);
      } finally {
        watching.destroy();
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
