/**
 * The sandbox side of files in and out, run with the host's own python3: what the runtime sends of the
 * artifacts folder at the end of a run (pieces, skip notices, only what is new or changed) and how it
 * takes `file` frames. The host checks all of it again (artifact_store_test.ts); these tests keep an
 * honest sandbox honest.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import type { Frame } from "./_local_python.ts";
import { TEST_CONFIG, withPython } from "./_local_python.ts";

type Piece = Extract<Frame, { type: "artifact" }>;

function config(maxFile = 8 * 1024 * 1024, maxFiles = 3) {
  const dir = join(mkdtempSync(join(tmpdir(), "codemode-art-")), "artifacts");
  return { dir, config: { ...TEST_CONFIG, artifacts: { dir, max_file: maxFile, max_files: maxFiles } } };
}

/** Reassembles the pieces of each file: path -> bytes. */
function files(frames: Frame[]): Map<string, Uint8Array> {
  const out = new Map<string, Buffer>();
  for (const f of frames) {
    if (f.type !== "artifact") continue;
    const before = out.get(f.path) ?? Buffer.alloc(0);
    assert.equal(f.offset, before.length, `${f.path}: pieces in order`);
    out.set(f.path, Buffer.concat([before, Buffer.from(f.data, "base64")]));
  }
  return out;
}

Deno.test("a run's new files go out in pieces under the frame cap; unchanged ones are not sent again", async () => {
  const { dir, config: c } = config();
  await withPython(async (python) => {
    const first = await python.execute(`
import os
os.makedirs("${dir}/sub", exist_ok=True)
open("${dir}/sub/big.bin", "wb").write(bytes(range(256)) * (5 * 4096))
from mcp import runtime
path = runtime.save_artifact("note.txt", "hé")
path`);
    assert.equal(first.done.status, "ok", first.done.error);
    assert.equal(first.done.value, `'${dir}/note.txt'`);
    const got = files(first.artifacts);
    assert.deepEqual([...got.keys()].sort(), ["note.txt", "sub/big.bin"]);
    assert.equal(new TextDecoder().decode(got.get("note.txt")), "hé");
    assert.equal(got.get("sub/big.bin")!.length, 256 * 5 * 4096);
    const big = first.artifacts.filter((f): f is Piece => f.type === "artifact" && f.path === "sub/big.bin");
    assert.equal(big.length, 2, "5 MiB goes as a 4 MiB piece and the rest");
    assert.deepEqual(big.map((f) => [f.offset, f.size, f.end ?? false]), [
      [0, 5 * 1024 * 1024, false],
      [4 * 1024 * 1024, 5 * 1024 * 1024, true],
    ]);
    const again = await python.execute("1");
    assert.deepEqual(again.artifacts, []);
    const changed = await python.execute(`runtime.save_artifact("note.txt", "changed")`);
    assert.deepEqual([...files(changed.artifacts).keys()], ["note.txt"]);
  }, c);
});

Deno.test("hidden files, links, FIFOs, bad names and files over the cap are announced as left out, once", async () => {
  const { dir, config: c } = config(1000, 2);
  await withPython(async (python) => {
    const run = await python.execute(`
import os
d = "${dir}"
open(f"{d}/.env", "w").write("x")
os.symlink("/etc/passwd", f"{d}/passwd")
os.mkfifo(f"{d}/pipe")
open(f"{d}/a:b", "w").write("x")
open(f"{d}/huge.bin", "wb").write(b"x" * 2000)
for name in ["one", "two", "three"]:
    open(f"{d}/{name}.txt", "w").write(name)`);
    const skipped = Object.fromEntries(
      run.artifacts.filter((f) => f.type === "artifact_skipped").map((
        f,
      ) => [f.path, f.type === "artifact_skipped" && f.reason]),
    );
    assert.deepEqual(skipped, {
      ".env": "hidden",
      "passwd": "symlink",
      "pipe": "not_regular",
      "a:b": "bad_name",
      "huge.bin": "too_large",
      "two.txt": "too_many",
    });
    assert.deepEqual([...files(run.artifacts).keys()].sort(), ["one.txt", "three.txt"]);
    const next = await python.execute("1");
    assert.deepEqual(
      next.artifacts.map((f) => f.path),
      ["two.txt"],
      "the one left for lack of room goes next",
    );
  }, c);
});

Deno.test("save_artifact() refuses names that could leave the folder or hide, and non-bytes data", async () => {
  const { config: c } = config();
  await withPython(async (python) => {
    const run = await python.execute(`
from mcp import runtime
out = {}
for name, data in [("../x", "d"), ("/etc/x", "d"), ("a/../b", "d"), (".env", "d"), ("a/.b", "d"),
                   ("a//b", "d"), ("ok.txt", 42), ("ok.bin", bytearray(b"fine"))]:
    try:
        runtime.save_artifact(name, data)
        out[name] = "saved"
    except (ValueError, TypeError) as e:
        out[name] = type(e).__name__
out`);
    assert.equal(
      run.done.value,
      "{'../x': 'ValueError', '/etc/x': 'ValueError', 'a/../b': 'ValueError', '.env': 'ValueError', " +
        "'a/.b': 'ValueError', 'a//b': 'ValueError', 'ok.txt': 'TypeError', 'ok.bin': 'saved'}",
    );
  }, c);
});

Deno.test("file frames put files and folders in place, read-only when asked, and report failures", async () => {
  const { config: c } = config();
  const base = mkdtempSync(join(tmpdir(), "codemode-put-"));
  await withPython(async (python) => {
    const data = Buffer.from("x".repeat(100)).toString("base64");
    python.send({ type: "file", id: "f1", path: `${base}/in/a.txt`, offset: 0, data, end: false });
    python.send({
      type: "file",
      id: "f1",
      path: `${base}/in/a.txt`,
      offset: 75,
      data,
      end: true,
      read_only: true,
    });
    assert.deepEqual(await python.next(), { type: "file_done", id: "f1", ok: true });
    python.send({
      type: "file",
      id: "d1",
      path: `${base}/in`,
      offset: 0,
      data: "",
      end: true,
      dir: true,
      read_only: true,
    });
    assert.deepEqual(await python.next(), { type: "file_done", id: "d1", ok: true });
    python.send({ type: "file", id: "f2", path: "relative.txt", offset: 0, data, end: true });
    const bad = await python.next();
    assert.equal(bad.type === "file_done" && bad.ok, false);
    assert.match(bad.type === "file_done" ? bad.error ?? "" : "", /must be absolute/);
    const run = await python.execute(`
import os, stat
p = "${base}/in/a.txt"
(len(open(p).read()), oct(stat.S_IMODE(os.stat(p).st_mode)), oct(stat.S_IMODE(os.stat("${base}/in").st_mode)))`);
    assert.equal(run.done.value, "(200, '0o444', '0o555')");
  }, c);
});
