import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zstdCompressSync } from "node:zlib";
import { ensureUnpacked, forgetVerified, type PackedFile } from "../../plugins/runtime/_unpack.ts";

const scratch = mkdtempSync(join(tmpdir(), "codemode-unpack-"));
globalThis.addEventListener("unload", () => rmSync(scratch, { recursive: true, force: true }));

/** A packed file of `size` pseudo-random bytes (zstd, as the binary carries them). */
function packed(name: string, size = 300_000, encoding: PackedFile["encoding"] = "zstd"): {
  file: PackedFile;
  bytes: Uint8Array;
} {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 7919 + (i >> 5)) & 0xff;
  const source = join(scratch, `${name}.packed`);
  writeFileSync(source, encoding === "zstd" ? zstdCompressSync(bytes) : bytes);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  return { file: { source, encoding, sha256, size }, bytes };
}

function target(name: string): string {
  return join(scratch, name, "out", "deno");
}

function same(path: string, bytes: Uint8Array): boolean {
  return Buffer.compare(readFileSync(path), bytes) === 0;
}

Deno.test("ensureUnpacked() writes the file with its mode, then only checks it", async () => {
  const { file, bytes } = packed("first");
  const path = target("first");
  assert.equal(await ensureUnpacked(file, path, 0o700), "unpacked");
  assert.ok(same(path, bytes));
  assert.equal(statSync(path).mode & 0o777, 0o700);
  assert.equal(statSync(join(path, "..")).mode & 0o777, 0o700, "the directory is private too");
  assert.equal(await ensureUnpacked(file, path, 0o700), "verified");
  forgetVerified();
  assert.equal(await ensureUnpacked(file, path, 0o700), "verified", "a fresh process hashes and keeps it");
  assert.deepEqual(readdirSync(join(path, "..")), ["deno"], "no temporary file is left");
});

Deno.test("a changed file is replaced, even when its size and mtime were put back", async () => {
  const { file, bytes } = packed("tamper");
  const path = target("tamper");
  await ensureUnpacked(file, path, 0o700);
  // Once the file is older than the timestamps' granularity, a check is a stat against what was hashed.
  await new Promise((r) => setTimeout(r, 2_200));
  assert.equal(await ensureUnpacked(file, path, 0o700), "verified");
  const before = statSync(path);
  // Same size, one byte different, mtime restored: only the inode's ctime tells.
  const changed = new Uint8Array(bytes);
  changed[1000] ^= 0xff;
  writeFileSync(path, changed);
  utimesSync(path, before.atime, before.mtime);
  assert.equal(await ensureUnpacked(file, path, 0o700), "replaced");
  assert.ok(same(path, bytes));

  // The same tampering seen by a process that never verified the file: the digest tells.
  writeFileSync(path, changed);
  forgetVerified();
  assert.equal(await ensureUnpacked(file, path, 0o700), "replaced");
  assert.ok(same(path, bytes));
});

Deno.test("a file swapped for a script, a symlink or a looser mode is replaced", async () => {
  const { file, bytes } = packed("swap");
  const path = target("swap");
  await ensureUnpacked(file, path, 0o700);
  writeFileSync(path, "#!/bin/sh\necho pwned\n");
  assert.equal(await ensureUnpacked(file, path, 0o700), "replaced");
  assert.ok(same(path, bytes));

  const elsewhere = join(scratch, "swap-elsewhere");
  writeFileSync(elsewhere, bytes);
  rmSync(path);
  symlinkSync(elsewhere, path);
  assert.equal(await ensureUnpacked(file, path, 0o700), "replaced");
  assert.ok(lstatSync(path).isFile(), "a regular file, not the link");

  chmodSync(path, 0o777);
  assert.equal(await ensureUnpacked(file, path, 0o700), "replaced");
  assert.equal(statSync(path).mode & 0o777, 0o700);
});

Deno.test("damaged carried bytes are refused: nothing is written under the real name", async () => {
  const { file } = packed("damaged");
  const path = target("damaged");
  await assert.rejects(
    ensureUnpacked({ ...file, sha256: "0".repeat(64) }, path, 0o700),
    /copy of "deno" inside this codemode binary is damaged/,
  );
  assert.equal(existsSync(path), false);
  assert.deepEqual(readdirSync(join(path, "..")), [], "the temporary file is gone");
});

Deno.test("uncompressed files unpack too, and concurrent callers in one process share one unpack", async () => {
  const { file, bytes } = packed("plain", 50_000, "identity");
  const path = target("plain");
  const outcomes = await Promise.all(Array.from({ length: 8 }, () => ensureUnpacked(file, path, 0o600)));
  assert.deepEqual(outcomes, Array(8).fill("unpacked"));
  assert.ok(same(path, bytes));
  assert.equal(statSync(path).mode & 0o777, 0o600);
});

Deno.test("leftover temporary files of dead processes are removed; live ones are left alone", async () => {
  const { file } = packed("stale");
  const path = target("stale");
  mkdirSync(join(path, ".."), { recursive: true });
  const dead = `${path}.999999999.abc.tmp`;
  const live = `${path}.${Deno.ppid}.abc.tmp`;
  writeFileSync(dead, "half");
  writeFileSync(live, "in progress");
  await ensureUnpacked(file, path, 0o700);
  assert.equal(existsSync(dead), false);
  assert.equal(existsSync(live), true);
});

Deno.test("processes unpacking the same file at once all end with the intact file", async () => {
  const { file, bytes } = packed("race", 4_000_000);
  const path = target("race");
  const module = new URL("../../plugins/runtime/_unpack.ts", import.meta.url).href;
  const script = `import { ensureUnpacked } from ${JSON.stringify(module)};
    const file = JSON.parse(Deno.args[0]);
    for (let i = 0; i < 5; i++) console.log(await ensureUnpacked(file, Deno.args[1], 0o700));`;
  const runs = await Promise.all(Array.from({ length: 4 }, () =>
    new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", script, JSON.stringify(file), path],
      stdout: "piped",
      stderr: "piped",
    }).output()));
  for (const run of runs) {
    assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
    const lines = new TextDecoder().decode(run.stdout).trim().split("\n");
    assert.ok(lines.every((line) => ["unpacked", "replaced", "verified"].includes(line)), lines.join(","));
  }
  assert.ok(same(path, bytes));
  assert.deepEqual(readdirSync(join(path, "..")), ["deno"], "no temporary file is left");
});
