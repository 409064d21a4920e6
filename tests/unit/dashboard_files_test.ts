/**
 * What the dashboard hands out besides its data, on a real loopback `codemode ui` over a state dir that
 * this test process publishes into as a serve: run images kept by the publisher (private files, capped,
 * oldest runs removed) and served as PNG or JPEG only; artifacts of live sessions downloaded as
 * attachments, with traversal, links, loose files, unknown and ended sessions refused; the skills panel;
 * and the watch marker an open page leaves for serves.
 */
import assert from "node:assert/strict";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Activity, type ActivityEvent, type RunEndEvent } from "../../core/observe/activity.ts";
import { ActivityPublisher } from "../../core/observe/activity_file.ts";
import { ImageBudget } from "../../core/observe/display_files.ts";
import { watched, WatchMarker } from "../../core/observe/watchers.ts";
import { sessionArtifactsDir } from "../../core/artifacts/stores.ts";
import { startUi, type UiServer } from "../../core/dashboard/ui.ts";
import { downloadType } from "../../core/dashboard/files.ts";
import type { SkillsView } from "../../core/dashboard/skills.ts";
import { idleServeState } from "./_serve_state.ts";

/** A pid no process can have (above Linux's largest pid_max). */
const DEAD_PID = 4_194_304 + 12_345;
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 9, 9, 9]);
const SESSION = "0123456789abcdef0123456789abcdef";
const ENDED = "fedcba9876543210fedcba9876543210";

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
}

/** One request with exactly this path (no client-side normalisation of `..`). */
function call(
  url: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode!, headers: res.headers, body, text: body.toString() });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

interface World {
  stateDir: string;
  ui: UiServer;
  activity: Activity;
  publisher: ActivityPublisher;
  cookie: string;
  get(path: string, headers?: Record<string, string>): Promise<Reply>;
  close(): Promise<void>;
}

async function world(
  options: { maxImageRuns?: number; maxImageBytes?: number; skills?: () => Promise<SkillsView> } = {},
): Promise<World> {
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-dash-files-"));
  const activity = new Activity();
  const publisher = new ActivityPublisher(stateDir, {
    activity,
    state: () => idleServeState({ artifactSessions: [SESSION] }),
    flushMs: 10,
    stateMs: 50,
    maxImageRuns: options.maxImageRuns,
    maxImageBytes: options.maxImageBytes,
  });
  await publisher.start();
  const ui = await startUi({
    stateDir,
    port: 0,
    version: "test",
    intervalMs: 50,
    search: () => [],
    ...(options.skills ? { skills: options.skills } : {}),
  });
  const login = await call(ui.loginUrl);
  const cookie = String(login.headers["set-cookie"]).split(";")[0];
  return {
    stateDir,
    ui,
    activity,
    publisher,
    cookie,
    get: (path, headers = {}) => call(ui.url + path, { headers: { cookie, ...headers } }),
    async close() {
      await ui.close();
      await publisher.stop();
    },
  };
}

/** Records a run end with these displays (images by index) and artifacts; resolves once it is published. */
async function runEnd(
  w: World,
  displays: RunEndEvent["displays"],
  images: [number, Uint8Array][],
  artifacts: RunEndEvent["artifacts"] = [],
): Promise<RunEndEvent> {
  const seen: ActivityEvent[] = [];
  const off = w.activity.subscribe((e) => seen.push(e));
  w.activity.record({
    kind: "run.end",
    run: "r",
    session: "stdio",
    status: "ok",
    ms: 1,
    stdout: "",
    stderr: "",
    displays,
    ...(artifacts.length ? { artifacts } : {}),
  }, { images: new Map(images) });
  off();
  await w.publisher.flush();
  const events = readFileSync(w.publisher.files.events, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  return events.find((e: ActivityEvent) => e.seq === seen[0].seq);
}

const mode = (path: string) => statSync(path).mode & 0o777;

Deno.test("a run's images are kept as private files beside the activity and served as PNG or JPEG only", async () => {
  const w = await world();
  try {
    const event = await runEnd(w, [
      { mimeType: "image/png", size: PNG.length },
      { mimeType: "text/plain", size: 9, text: "a  b\n1  2" },
      { mimeType: "image/jpeg", size: JPEG.length },
      { mimeType: "image/png", size: 13 },
      { mimeType: "image/svg+xml", size: 40, text: "<svg onload=alert(1)>" },
    ], [[0, PNG], [2, JPEG], [3, new TextEncoder().encode("<html>no png")]]);
    const [png, table, jpeg, fake, svg] = event.displays!;
    assert.equal(png.file, `${event.seq}-0.png`);
    assert.equal(jpeg.file, `${event.seq}-2.jpg`);
    assert.equal(fake.file, undefined);
    assert.equal(fake.notKept, "it is not a PNG or JPEG image");
    assert.equal(table.text, "a  b\n1  2");
    assert.equal(svg.text, "<svg onload=alert(1)>", "SVG stays text");
    assert.equal(mode(w.publisher.files.displays), 0o700);
    assert.equal(mode(join(w.publisher.files.displays, png.file!)), 0o600);
    assert.doesNotMatch(
      readFileSync(w.publisher.files.events, "utf8"),
      /iVBOR|base64/,
      "no image data in the log",
    );

    const base = `api/serves/${process.pid}/displays/`;
    const image = await w.get(base + png.file);
    assert.equal(image.status, 200);
    assert.equal(image.headers["content-type"], "image/png");
    assert.equal(image.headers["x-content-type-options"], "nosniff");
    assert.equal(image.headers["content-security-policy"], "default-src 'none'; sandbox");
    assert.deepEqual(new Uint8Array(image.body), PNG);
    assert.equal((await w.get(base + jpeg.file)).headers["content-type"], "image/jpeg");
    const head = await call(w.ui.url + base + png.file, { method: "HEAD", headers: { cookie: w.cookie } });
    assert.deepEqual([head.status, head.body.length], [200, 0]);

    for (
      const name of [
        "../" + png.file,
        "..%2F" + png.file,
        "%2e%2e/" + png.file,
        `${event.seq}-0.svg`,
        `${event.seq}-0.html`,
        `0${event.seq}-0.png`,
        `${event.seq}-0.png%00.html`,
        `${event.seq}-0.png/x`,
        "x.png",
      ]
    ) {
      const r = await w.get(base + name);
      assert.ok(r.status === 404, `${name}: ${r.status}`);
      assert.doesNotMatch(String(r.headers["content-type"]), /image|html/, name);
    }
    assert.equal((await w.get(base + png.file, { cookie: "" })).status, 401, "without the cookie");
    assert.equal(
      (await w.get(`api/serves/${DEAD_PID}/displays/${png.file}`)).status,
      404,
      "a serve not shown",
    );
    const origin = await w.get(base + png.file, { origin: "https://evil.example" });
    assert.equal(origin.status, 403, "another origin");

    // A file under an image's name that is not an image, or a link, is refused.
    writeFileSync(join(w.publisher.files.displays, "99-0.png"), "<script>alert(1)</script>", { mode: 0o600 });
    const planted = await w.get(base + "99-0.png");
    assert.equal(planted.status, 404);
    assert.doesNotMatch(planted.text, /<script>/);
    const outside = join(w.stateDir, "elsewhere.png");
    writeFileSync(outside, PNG, { mode: 0o600 });
    symlinkSync(outside, join(w.publisher.files.displays, "98-0.png"));
    assert.equal((await w.get(base + "98-0.png")).status, 403);
    writeFileSync(join(w.publisher.files.displays, "97-0.png"), PNG, { mode: 0o644 });
    assert.equal((await w.get(base + "97-0.png")).status, 403, "a file others can read is not ours to serve");
    const missing = await w.get(base + "96-0.png");
    assert.equal(missing.status, 404);
    assert.match(JSON.parse(missing.text).error, /is no longer kept/);
  } finally {
    await w.close();
  }
});

Deno.test("the publisher keeps the images of the latest runs within its cap, removing the oldest first", async () => {
  const w = await world({ maxImageRuns: 2, maxImageBytes: 2 * PNG.length });
  try {
    const files: string[] = [];
    for (let i = 0; i < 3; i++) {
      const e = await runEnd(w, [{ mimeType: "image/png", size: PNG.length }], [[0, PNG]]);
      files.push(e.displays![0].file!);
    }
    const exists = (name: string) => {
      try {
        statSync(join(w.publisher.files.displays, name));
        return true;
      } catch {
        return false;
      }
    };
    assert.deepEqual(files.map(exists), [false, true, true], "two runs kept");
    const big = await runEnd(w, [
      { mimeType: "image/png", size: PNG.length },
      { mimeType: "image/png", size: PNG.length },
      { mimeType: "image/png", size: PNG.length },
    ], [[0, PNG], [1, PNG], [2, PNG]]);
    assert.deepEqual(big.displays!.map((d) => Boolean(d.file)), [true, true, false]);
    assert.match(big.displays![2].notKept!, /keeps at most 0 MiB of images per serve/);
    assert.deepEqual(
      files.map(exists),
      [false, false, false],
      "the new run's images pushed the older ones out",
    );
  } finally {
    await w.close();
  }
  const budget = new ImageBudget(100, 3);
  assert.deepEqual(budget.admit([{ name: "a", size: 60 }, { name: "b", size: 50 }]).kept, ["a"]);
  const next = budget.admit([{ name: "c", size: 60 }]);
  assert.deepEqual([next.kept, next.evicted, budget.total], [["c"], ["a"], 60]);
});

/** Writes an artifact as the store keeps it (0700 folders, 0600 file); returns its path. */
function artifact(stateDir: string, session: string, path: string, data: string | Uint8Array, mode = 0o600) {
  const file = join(sessionArtifactsDir(stateDir, process.pid, session), "files", path);
  mkdirSync(join(file, ".."), { recursive: true, mode: 0o700 });
  writeFileSync(file, data, { mode });
  chmodSync(file, mode);
  return file;
}

Deno.test("a live session's artifact downloads as an attachment; traversal, links, loose files and other sessions are refused", async () => {
  const w = await world();
  try {
    const bytes = new Uint8Array(70_000).map((_, i) => (i * 31) % 256);
    artifact(w.stateDir, SESSION, "report/data.bin", bytes);
    artifact(w.stateDir, SESSION, "report/sales.csv", "month,sales\nJan,1\n");
    artifact(w.stateDir, SESSION, "page.html", "<script>alert(1)</script>");
    const secret = join(w.stateDir, "secret.txt");
    writeFileSync(secret, "the user's secret", { mode: 0o600 });
    await runEnd(w, [], [], [
      { uri: `codemode://artifacts/${ENDED}/old.txt`, name: "old.txt", mimeType: "text/plain", size: 1 },
    ]);
    const base = `api/serves/${process.pid}/artifacts/`;

    const data = await w.get(`${base}${SESSION}/report/data.bin`);
    assert.equal(data.status, 200);
    assert.deepEqual(new Uint8Array(data.body), bytes, "byte for byte");
    assert.equal(
      data.headers["content-disposition"],
      `attachment; filename="data.bin"; filename*=UTF-8''data.bin`,
    );
    assert.equal(data.headers["x-content-type-options"], "nosniff");
    assert.equal(data.headers["content-security-policy"], "default-src 'none'; sandbox");
    assert.equal((await w.get(`${base}${SESSION}/report/sales.csv`)).headers["content-type"], "text/csv");
    const html = await w.get(`${base}${SESSION}/page.html`);
    assert.equal(html.headers["content-type"], "application/octet-stream", "never served as a page");
    assert.match(String(html.headers["content-disposition"]), /^attachment/);

    for (
      const tail of [
        `${SESSION}/..%2F..%2F..%2Fsecret.txt`,
        `${SESSION}/report%2F..%2F..%2F..%2Fsecret.txt`,
        `${SESSION}/%2Fetc%2Fpasswd`,
        `${SESSION}/.hidden`,
        `${SESSION}/a%5C..%5Csecret.txt`,
        `${SESSION}/report%00.txt`,
        `${SESSION}`,
        `..%2F${SESSION}/report/data.bin`,
        `${SESSION.toUpperCase()}/report/data.bin`,
        `${SESSION}/../../../../secret.txt`,
      ]
    ) {
      const r = await w.get(base + tail);
      assert.ok([404, 400].includes(r.status), `${tail}: ${r.status}`);
      assert.doesNotMatch(r.text, /the user's secret|root:/, tail);
    }
    const unknown = await w.get(`${base}${"a".repeat(32)}/report/data.bin`);
    assert.equal(unknown.status, 404);
    assert.match(JSON.parse(unknown.text).error, /has no artifact session/);
    const ended = await w.get(`${base}${ENDED}/old.txt`);
    assert.equal(ended.status, 410);
    assert.match(JSON.parse(ended.text).error, /is gone: its session ended/);
    const absent = await w.get(`${base}${SESSION}/nope.txt`);
    assert.equal(absent.status, 404);

    // A link in place of the file, or of a folder on the way, and a file others may read: refused.
    symlinkSync(secret, join(sessionArtifactsDir(w.stateDir, process.pid, SESSION), "files", "linked.txt"));
    const linked = await w.get(`${base}${SESSION}/linked.txt`);
    assert.equal(linked.status, 403);
    assert.doesNotMatch(linked.text, /secret/);
    const elsewhere = mkdtempSync(join(tmpdir(), "codemode-elsewhere-"));
    writeFileSync(join(elsewhere, "x.txt"), "the user's secret", { mode: 0o600 });
    symlinkSync(elsewhere, join(sessionArtifactsDir(w.stateDir, process.pid, SESSION), "files", "dir"));
    assert.equal((await w.get(`${base}${SESSION}/dir/x.txt`)).status, 403);
    artifact(w.stateDir, SESSION, "loose.txt", "x", 0o644);
    assert.equal((await w.get(`${base}${SESSION}/loose.txt`)).status, 403);
    assert.equal((await w.get(`${base}${SESSION}/report/data.bin`, { cookie: "" })).status, 401);
  } finally {
    await w.close();
  }
  assert.equal(downloadType("a.svg"), "application/octet-stream");
  assert.equal(downloadType("a.js"), "application/octet-stream");
  assert.equal(downloadType("a.xhtml"), "application/octet-stream");
  assert.equal(downloadType("a"), "application/octet-stream");
  assert.equal(downloadType("a.png"), "image/png");
});

Deno.test("/api/skills answers the panel's data, says when skills are off, and a failure clearly", async () => {
  const view: SkillsView = {
    mode: "rw",
    directories: [{ path: "/home/u/.config/codemode/skills", kind: "user" }],
    skills: [{
      name: "csv-summary",
      module: "csv_summary",
      description: "Summarize a CSV",
      kind: "code",
      source: "user",
      directory: "/home/u/.config/codemode/skills",
      functions: ["summarize"],
      manifest: "---\nname: csv-summary\n---\n",
    }],
    diagnostics: [],
  };
  let fail = false;
  const w = await world({
    skills: () => fail ? Promise.reject(new Error("the disk is gone")) : Promise.resolve(view),
  });
  try {
    assert.deepEqual(JSON.parse((await w.get("api/skills")).text), view);
    fail = true;
    const failed = await w.get("api/skills");
    assert.equal(failed.status, 500);
    assert.match(JSON.parse(failed.text).error, /Could not read the skills: the disk is gone/);
    assert.equal((await w.get("api/skills", { cookie: "" })).status, 401);
  } finally {
    await w.close();
  }
  const off = await world();
  try {
    assert.equal(JSON.parse((await off.get("api/skills")).text).mode, "off");
  } finally {
    await off.close();
  }
});

Deno.test("an open page leaves a watch marker that serves read; it goes when the page does, or goes stale", async () => {
  const w = await world();
  try {
    assert.equal(await watched(w.stateDir, process.pid), false, "no page open");
    const stream = request(w.ui.url + "api/events", { headers: { cookie: w.cookie } });
    stream.end();
    const deadline = Date.now() + 5000;
    while (!(await watched(w.stateDir, process.pid)) && Date.now() < deadline) await sleep(20);
    assert.equal(await watched(w.stateDir, process.pid), true, "a page watches every serve");
    stream.destroy();
    while ((await watched(w.stateDir, process.pid)) && Date.now() < deadline) await sleep(20);
    assert.equal(await watched(w.stateDir, process.pid), false, "the page left");
  } finally {
    await w.close();
  }
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-watch-"));
  const only = new WatchMarker(stateDir, { only: 4242 });
  await only.pages(1);
  assert.equal(mode(only.path), 0o600);
  assert.equal(await watched(stateDir, 4242), true);
  assert.equal(await watched(stateDir, process.pid), false, "serve --http's page shows that serve only");
  assert.equal(await watched(stateDir, 4242, Date.now() + 60_000), false, "a marker not refreshed is stale");
  chmodSync(only.path, 0o644);
  assert.equal(await watched(stateDir, 4242), false, "a marker others can write is not trusted");
  await only.close();
  const dead = join(stateDir, "activity", `watch-${DEAD_PID}.json`);
  writeFileSync(dead, JSON.stringify({ pid: DEAD_PID, pages: 1, at: Date.now() }), { mode: 0o600 });
  assert.equal(await watched(stateDir, 4242), false);
  assert.throws(() => statSync(dead), "a dead dashboard's marker is removed");
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
