import assert from "node:assert/strict";
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Activity, type ActivityEvent, MAX_TEXT } from "../../core/observe/activity.ts";
import {
  activityDir,
  activityFiles,
  ActivityInbox,
  ActivityPublisher,
  type InboxMessage,
  sendToInbox,
} from "../../core/observe/activity_file.ts";
import { redactArguments, REDACTED } from "../../core/upstream/redact.ts";
import { setLogSink } from "../../core/observe/log.ts";
import { LiveServes } from "../../core/dashboard/live_serves.ts";

/** A pid no process can have (above Linux's largest pid_max). */
const DEAD_PID = 4_194_304 + 12_345;

const stateDir = () => mkdtempSync(join(tmpdir(), "codemode-activity-"));
const mode = (path: string) => statSync(path).mode & 0o777;
const lines = (path: string): ActivityEvent[] =>
  readFileSync(path, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));

Deno.test("Activity records nothing while nobody listens, then numbers events and clips long text", () => {
  const activity = new Activity();
  activity.record({ kind: "run.start", run: "r0", session: "s", code: "print(0)", timeout: 1 });
  const seen: ActivityEvent[] = [];
  const stop = activity.subscribe((e) => seen.push(e));
  assert.equal(activity.enabled, true);
  activity.record({
    kind: "run.start",
    run: "r1",
    session: "s",
    code: "x".repeat(MAX_TEXT + 10),
    timeout: 1,
  });
  activity.record({ kind: "tool.call", server: "a", tool: "b", args: "{}", ms: 1, outcome: "ok" });
  stop();
  activity.record({ kind: "run.start", run: "r2", session: "s", code: "", timeout: 1 });
  assert.deepEqual(seen.map((e) => e.seq), [1, 2]);
  const start = seen[0] as Extract<ActivityEvent, { kind: "run.start" }>;
  assert.ok(start.code.length < MAX_TEXT + 100);
  assert.match(start.code, /\[10 more characters not kept in the activity log\]$/);
  assert.ok(!Number.isNaN(Date.parse(start.at)));
});

Deno.test("redactArguments() hides secret-named keys and the server's configured secrets", () => {
  const text = redactArguments(
    { query: "hello sk-live-12345678", nested: { api_key: "abc12345", password: 1234567 }, list: ["x"] },
    ["sk-live-12345678"],
  );
  const parsed = JSON.parse(text);
  assert.equal(parsed.query, `hello ${REDACTED}`);
  assert.deepEqual(parsed.nested, { api_key: REDACTED, password: REDACTED });
  assert.deepEqual(parsed.list, ["x"]);
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  assert.match(redactArguments(circular, []), /^\[arguments not shown: /);
});

Deno.test("ActivityPublisher writes events and state as private files, rotates the log and cleans up on stop", async () => {
  const dir = stateDir();
  const activity = new Activity();
  let state = { version: "1", n: 0 };
  const publisher = new ActivityPublisher(dir, {
    activity,
    state: () => state,
    maxBytes: 2000,
    flushMs: 10,
    stateMs: 60_000,
  });
  await publisher.start();
  const files = activityFiles(dir, process.pid);
  assert.equal(mode(activityDir(dir)), 0o700);
  assert.equal(mode(files.inbox), 0o700);
  assert.equal(mode(files.state), 0o600);
  assert.deepEqual(JSON.parse(readFileSync(files.state, "utf8")), state);
  for (let i = 0; i < 30; i++) {
    activity.record({ kind: "run.start", run: `run-${i}`, session: "s", code: "y".repeat(100), timeout: 1 });
  }
  state = { version: "1", n: 1 };
  await publisher.flush();
  assert.equal(mode(files.events), 0o600);
  assert.equal(mode(files.rotated), 0o600);
  const seqs = [...lines(files.rotated), ...lines(files.events)].map((e) => e.seq);
  assert.deepEqual(seqs, Array.from({ length: 30 }, (_, i) => i + 1), "every event once, in order");
  assert.ok(statSync(files.rotated).size >= 2000 && statSync(files.events).size < 2000);
  assert.equal(JSON.parse(readFileSync(files.state, "utf8")).n, 1, "a changed state is rewritten");
  assert.equal(readdirSync(activityDir(dir)).filter((n) => n.endsWith(".tmp")).length, 0);
  await publisher.stop();
  assert.deepEqual(readdirSync(activityDir(dir)), [], "a stopped serve leaves nothing behind");
});

Deno.test("ActivityPublisher tightens a loosened activity folder it owns", async () => {
  const dir = stateDir();
  const folder = activityDir(dir);
  const { mkdirSync } = await import("node:fs");
  mkdirSync(folder, { mode: 0o777 });
  chmodSync(folder, 0o777);
  const publisher = new ActivityPublisher(dir, { activity: new Activity(), state: () => ({}) });
  await publisher.start();
  assert.equal(mode(folder), 0o700);
  await publisher.stop();
});

Deno.test("ActivityInbox hands a private message to its handler once, and refuses loose or linked files", async () => {
  const dir = stateDir();
  const logged: string[] = [];
  setLogSink((line) => logged.push(line));
  const publisher = new ActivityPublisher(dir, { activity: new Activity(), state: () => ({}) });
  await publisher.start();
  const inbox = new ActivityInbox(dir, { intervalMs: 60_000 });
  const got: InboxMessage[] = [];
  const off = inbox.on("approval", (m) => void got.push(m));
  try {
    await sendToInbox(dir, process.pid, { kind: "approval", id: "a1", answer: "approve" });
    const files = readdirSync(inbox.dir);
    assert.equal(files.length, 1);
    assert.equal(mode(join(inbox.dir, files[0])), 0o600);
    // A message anyone could have written, and a link to a file elsewhere: both refused.
    const loose = join(inbox.dir, "loose.json");
    writeFileSync(loose, JSON.stringify({ kind: "approval", id: "a2", answer: "approve" }));
    chmodSync(loose, 0o666);
    const elsewhere = join(dir, "elsewhere.json");
    writeFileSync(elsewhere, JSON.stringify({ kind: "approval", id: "a3", answer: "approve" }), {
      mode: 0o600,
    });
    symlinkSync(elsewhere, join(inbox.dir, "link.json"));
    await inbox.poll();
    assert.deepEqual(got, [{ kind: "approval", id: "a1", answer: "approve" }]);
    assert.deepEqual(readdirSync(inbox.dir), [], "handled and refused messages are removed");
    assert.ok(existsSync(elsewhere), "the link's target is left alone");
    assert.equal(logged.filter((l) => l.includes("refused an inbox message")).length, 2);
    await inbox.poll();
    assert.equal(got.length, 1, "a message is handled once");
  } finally {
    off();
    setLogSink((line) => console.error(line));
    await publisher.stop();
  }
});

Deno.test("sendToInbox() refuses an inbox folder others can write to, and a serve that is gone", async () => {
  const dir = stateDir();
  const publisher = new ActivityPublisher(dir, { activity: new Activity(), state: () => ({}) });
  await publisher.start();
  chmodSync(publisher.files.inbox, 0o777);
  await assert.rejects(
    sendToInbox(dir, process.pid, { kind: "approval" }),
    /Refused ".*inbox": its mode 777 lets other users in/,
  );
  await publisher.stop();
  await assert.rejects(sendToInbox(dir, process.pid, { kind: "approval" }), /ENOENT|No such file/);
});

Deno.test("LiveServes follows a serve's log across rotations, each event once and in order", async () => {
  const dir = stateDir();
  const activity = new Activity();
  const publisher = new ActivityPublisher(dir, {
    activity,
    state: () => ({ pid: process.pid }),
    maxBytes: 1500,
    flushMs: 5,
    stateMs: 60_000,
  });
  await publisher.start();
  const live = new LiveServes(dir);
  const seen: number[] = [];
  const off = live.subscribe((u) => u.type === "events" && seen.push(...u.events.map((e) => e.seq)));
  live.close(); // polled by hand below
  let n = 0;
  for (let round = 0; round < 12; round++) {
    for (let i = 0; i < 4; i++) {
      activity.record({ kind: "run.start", run: `r${n++}`, session: "s", code: "é".repeat(90), timeout: 1 });
    }
    await publisher.flush();
    await live.refresh();
  }
  off();
  assert.deepEqual(seen, Array.from({ length: n }, (_, i) => i + 1));
  assert.equal(live.serves()[0].events.length, n);
  await publisher.stop();
  await live.refresh();
  assert.deepEqual(live.serves(), [], "a stopped serve is gone");
});

Deno.test("LiveServes skips state files that are not private and removes the files of dead serves", async () => {
  const dir = stateDir();
  const publisher = new ActivityPublisher(dir, {
    activity: new Activity(),
    state: () => ({ pid: process.pid }),
  });
  await publisher.start();
  const dead = activityFiles(dir, DEAD_PID);
  writeFileSync(dead.state, "{}", { mode: 0o600 });
  writeFileSync(dead.events, "", { mode: 0o600 });
  const live = new LiveServes(dir);
  await live.refresh();
  assert.deepEqual(live.serves().map((s) => s.pid), [process.pid]);
  assert.equal(existsSync(dead.state), false);
  assert.equal(existsSync(dead.events), false);
  chmodSync(publisher.files.state, 0o644);
  const fresh = new LiveServes(dir);
  await fresh.refresh();
  assert.deepEqual(fresh.serves(), [], "a state file others can read is not trusted");
  await publisher.stop();
});
