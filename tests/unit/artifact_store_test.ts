/**
 * The host side of artifacts without a sandbox: the path rules, a session's store on disk (modes, caps,
 * conflicts, replacement), the stores of a process (deletion, reaping a dead one's), and the receiver
 * that turns untrusted artifact frames into stored files and notes.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import { artifactPathProblem, artifactUri, parseArtifactTail } from "../../core/artifacts/paths.ts";
import { ArtifactStore, mimeTypeOf } from "../../core/artifacts/store.ts";
import { ArtifactStores, processFolderName } from "../../core/artifacts/stores.ts";
import { ArtifactReceiver, withArtifacts } from "../../core/sandbox/artifact_receiver.ts";
import type { SandboxFrame } from "../../core/sandbox/protocol.ts";

const temp = () => mkdtempSync(join(tmpdir(), "codemode-store-"));
const mode = (path: string) => statSync(path).mode & 0o777;
const b64 = (text: string | Uint8Array) => Buffer.from(text).toString("base64");

Deno.test("artifactPathProblem() admits plain relative paths and refuses everything that could escape or hide", () => {
  for (const ok of ["a.txt", "dir/sub/file.csv", "naïve é.png", "%2e%2e/x", "a..b", "x.", "-rf"]) {
    assert.equal(artifactPathProblem(ok), undefined, ok);
  }
  const bad: [unknown, RegExp][] = [
    ["", /empty/],
    [42, /empty/],
    ["/etc/passwd", /absolute/],
    ["../x", /"\.\." component/],
    ["a/../../x", /"\.\." component/],
    ["a/./b", /"\." component/],
    ["a//b", /empty component/],
    ["a/", /empty component/],
    [".env", /hidden/],
    ["a/.git/config", /hidden/],
    ["a\\b", /backslash/],
    ["c:x", /colon/],
    ["a\u0000b", /control/],
    ["a\nb", /control/],
    ["\ud800x", /Unicode/],
    ["x".repeat(1025), /longer than 1024/],
    ["x".repeat(256), /too long/],
  ];
  for (const [path, why] of bad) {
    assert.match(artifactPathProblem(path) ?? "", why, String(path).slice(0, 20));
  }
});

Deno.test("artifact URIs percent-encode each component and parse back; bad tails name nothing", () => {
  const uri = artifactUri("abc", "dir/naïve é.txt");
  assert.equal(uri, "codemode://artifacts/abc/dir/na%C3%AFve%20%C3%A9.txt");
  assert.deepEqual(parseArtifactTail(uri.slice("codemode://artifacts/".length)), {
    session: "abc",
    path: "dir/naïve é.txt",
  });
  for (const tail of ["abc", "abc/..%2Fx", "abc/%2e%2e/x", "abc/%E0%A4%A", "abc/.hidden", "/x"]) {
    assert.equal(parseArtifactTail(tail), undefined, tail);
  }
});

Deno.test("mimeTypeOf() goes by the name, then by whether the bytes are UTF-8 text", () => {
  assert.equal(mimeTypeOf("plot.png", new Uint8Array([0])), "image/png");
  assert.equal(mimeTypeOf("t.csv", new Uint8Array()), "text/csv");
  assert.equal(mimeTypeOf("script.py", new TextEncoder().encode("print('é')")), "text/plain");
  assert.equal(mimeTypeOf("noext", new Uint8Array([0x89, 0, 1])), "application/octet-stream");
});

async function put(store: ArtifactStore, path: string, text: string) {
  const incoming = await store.receive(path, text.length);
  assert.ok(!("reason" in incoming), JSON.stringify(incoming));
  assert.equal(await incoming.write(new TextEncoder().encode(text)), undefined);
  return await incoming.commit();
}

Deno.test("a store keeps files owner-only, replaces them whole, and reads back only known paths", async () => {
  const dir = join(temp(), "s1");
  const store = new ArtifactStore("s1", dir, { maxFile: 100, maxTotal: 150 });
  const info = await put(store, "a/b.txt", "hello");
  assert.ok(!("reason" in info));
  assert.equal(mode(dir), 0o700);
  assert.equal(mode(join(dir, "files", "a")), 0o700);
  assert.equal(mode(join(dir, "files", "a", "b.txt")), 0o600);
  assert.equal(new TextDecoder().decode(await store.read("a/b.txt")), "hello");
  assert.equal(await store.read("a/missing.txt"), undefined);
  assert.equal(await store.read("../../etc/passwd"), undefined);
  await put(store, "a/b.txt", "replaced");
  assert.equal(store.used, 8);
  assert.deepEqual(store.list().map((i) => [i.path, i.size]), [["a/b.txt", 8]]);
  assert.deepEqual(readdirSync(join(dir, "incoming")), [], "no partial file is left");
  await store.close();
  assert.equal(existsSync(dir), false);
});

Deno.test("a store refuses files over the per-file and per-session caps, and a file that would be a folder", async () => {
  const store = new ArtifactStore("s2", join(temp(), "s2"), { maxFile: 100, maxTotal: 150, maxFiles: 3 });
  const early = await store.receive("big.bin", 101);
  assert.ok("reason" in early && early.reason === "too_large");
  assert.match((early as { note: string }).note, /over the 0\.0 MiB cap per file \(CODEMODE_MAX_ARTIFACT\)/);
  // A sandbox that announces less than it sends is caught as the bytes arrive.
  const liar = await store.receive("liar.bin", 1);
  assert.ok(!("reason" in liar));
  assert.equal((await liar.write(new Uint8Array(101)))?.reason, "too_large");
  await put(store, "one.bin", "x".repeat(100));
  const second = await store.receive("two.bin", 60);
  assert.ok("reason" in second && second.reason === "session_full");
  assert.match((second as { note: string }).note, /CODEMODE_MAX_SESSION_ARTIFACTS/);
  await put(store, "dir", "file");
  const under = await store.receive("dir/child", 1);
  assert.ok("reason" in under && under.reason === "conflict");
  await put(store, "x/y", "1");
  const over = await store.receive("x", 1);
  assert.ok("reason" in over && over.reason === "conflict");
  const many = await store.receive("fourth", 1);
  assert.ok("reason" in many && many.reason === "too_many");
  assert.equal((await store.receive("../up", 1) as { reason: string }).reason, "bad_path");
});

Deno.test("each store has its own unguessable id; a process deletes its stores and reaps those of dead ones", async () => {
  const state = temp();
  const stores = new ArtifactStores(state, { maxFile: 10, maxTotal: 10 });
  const [a, b] = [stores.open(), stores.open()];
  assert.match(a.id, /^[0-9a-f]{32}$/);
  assert.notEqual(a.id, b.id);
  assert.equal(stores.get(a.id), a);
  await put(a, "x.txt", "a");
  await put(b, "x.txt", "b");
  await stores.close(b.id);
  assert.equal(new TextDecoder().decode(await a.read("x.txt")), "a", "closing one store leaves the other");
  assert.equal(stores.get(b.id), undefined);

  const root = join(state, "artifacts");
  const dead = join(root, processFolderName(hostname(), 999_999_999));
  const alive = join(root, processFolderName(hostname(), process.ppid));
  const elsewhere = join(root, processFolderName("another-host", 999_999_999));
  for (const dir of [dead, alive, elsewhere]) mkdirSync(join(dir, "id", "files"), { recursive: true });
  writeFileSync(join(dead, "id", "files", "old.txt"), "old");
  assert.equal(await stores.reapLeftovers(), 1);
  assert.equal(existsSync(dead), false);
  assert.ok(existsSync(alive) && existsSync(elsewhere), "live processes and other hosts are left alone");
  assert.ok(existsSync(stores.dir), "its own folder is not reaped");
  await stores.closeAll();
  assert.equal(existsSync(stores.dir), false);
});

type ArtifactFrame = Extract<SandboxFrame, { type: "artifact" | "artifact_skipped" }>;

async function receive(frames: Partial<ArtifactFrame>[], maxFiles = 20) {
  const limits = { maxFile: 1000, maxTotal: 5000 };
  const store = new ArtifactStore("r", join(temp(), "r"), limits);
  const malformed: string[] = [];
  const receiver = new ArtifactReceiver(store, maxFiles, (why) => malformed.push(why));
  for (const frame of frames) {
    await receiver.take({ type: "artifact", id: "run", offset: 0, data: "", ...frame } as ArtifactFrame);
  }
  const result = await receiver.finish();
  return { store, malformed, ...result };
}

Deno.test("the receiver keeps files whose pieces arrive in order and links them once, last version wins", async () => {
  const r = await receive([
    { path: "a.txt", data: b64("hel"), size: 5 },
    { path: "a.txt", offset: 3, data: b64("lo"), end: true, size: 5 },
    { path: "b.bin", data: b64(new Uint8Array([0, 1, 2])), end: true },
    { path: "a.txt", data: b64("again"), end: true },
  ]);
  assert.deepEqual(r.notes, []);
  assert.deepEqual(r.malformed, []);
  assert.deepEqual(r.links.map((l) => [l.name, l.size, l.mimeType]), [
    ["b.bin", 3, "application/octet-stream"],
    ["a.txt", 5, "text/plain"],
  ]);
  assert.equal(new TextDecoder().decode(await r.store.read("a.txt")), "again");
  assert.match(r.links[0].uri, /^codemode:\/\/artifacts\/r\/b\.bin$/);
});

Deno.test("the receiver drops whole any file whose frames break the rules, and says why", async () => {
  const r = await receive([
    { path: "../x", data: b64("x"), end: true },
    { path: "gap.txt", data: b64("ab") },
    { path: "gap.txt", offset: 5, data: b64("cd"), end: true },
    { path: "late.txt", offset: 3, data: b64("x"), end: true },
    { path: "bad.txt", data: "not base64!", end: true },
    { path: "liar.txt", data: b64("abc"), end: true, size: 2 },
    { path: "huge.bin", data: b64("x"), size: 10_000 },
    { path: "left.txt", data: b64("x") },
    { path: "next.txt", data: b64("y"), end: true },
    { path: "unfinished.txt", data: b64("z") },
    { type: "artifact_skipped", path: "too.big", reason: "too_large", size: 5000 } as Partial<ArtifactFrame>,
    { type: "artifact_skipped", path: ".env", reason: "hidden" } as Partial<ArtifactFrame>,
  ]);
  assert.deepEqual(r.links.map((l) => l.name), ["next.txt"]);
  const notes = r.notes.join("\n");
  for (
    const expected of [
      /"\.\.\/x" was refused: the path has a "\.\." component/,
      /"gap\.txt" was dropped: its pieces came out of order/,
      /"late\.txt" was dropped: its pieces came out of order/,
      /"bad\.txt" was dropped: a piece was not valid base64/,
      /"liar\.txt" was dropped: its size does not match/,
      /"huge\.bin" was left out: it is 0\.0 MiB, over the 0\.0 MiB cap per file/,
      /"left\.txt" was dropped: another file began before it had fully arrived/,
      /"unfinished\.txt" was dropped: it had not fully arrived when the run ended/,
      /"too\.big" was left out: it is 0\.0 MiB, over/,
      /"\.env" was left out: hidden files and folders are not collected/,
    ]
  ) assert.match(notes, expected);
  assert.ok(r.malformed.length >= 5, "protocol breaches are counted as malformed frames");
  assert.deepEqual(r.store.list().map((i) => i.path), ["next.txt"]);
  assert.deepEqual(readdirSync(join(r.store.dir, "incoming")), [], "no partial file is left");
});

Deno.test("the receiver caps files per run and notes per result", async () => {
  const frames = Array.from({ length: 40 }, (_, i) => ({ path: `../bad-${i}`, data: b64("x"), end: true }));
  frames.push(...Array.from({ length: 7 }, (_, i) => ({ path: `ok-${i}.txt`, data: b64("x"), end: true })));
  const r = await receive(frames, 5);
  assert.equal(r.links.length, 5, "at most maxFiles per run");
  assert.equal(r.notes.length, 21);
  assert.match(r.notes.at(-1)!, /^22 more artifact\(s\) were left out$/);
});

Deno.test("withArtifacts() adds the links and the notes, and leaves a result without any untouched", () => {
  const result = { status: "ok" as const, stdout: "", stderr: "", duration: 0, notes: ["first"] };
  assert.equal(withArtifacts(result, { links: [], notes: [] }), result);
  const link = { uri: "codemode://artifacts/s/a", name: "a", mimeType: "text/plain", size: 1 };
  assert.deepEqual(withArtifacts(result, { links: [link], notes: ["second"] }), {
    ...result,
    artifacts: [link],
    notes: ["first", "second"],
  });
});
