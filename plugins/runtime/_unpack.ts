/**
 * Files a compiled binary carries (zstd-compressed or as they are) and unpacks on first use, each with
 * the SHA-256 digest and size it was built with. Unpacking writes a temporary file and renames it into
 * place, so a second codemode unpacking at the same moment, or one killed halfway, never leaves half a
 * file under the real name. Before every launch the caller asks {@link ensureUnpacked} again: a file this
 * process already hashed is only hashed again when its identity changed (inode, size, mtime or ctime:
 * every write, rename and chmod moves the ctime, which no unprivileged process can set back); a file whose
 * digest is wrong is replaced, never used.
 * @module
 */
import { createHash } from "node:crypto";
import { closeSync, createWriteStream, openSync, readSync } from "node:fs";
import { chmod, lstat, mkdir, readdir, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createZstdDecompress } from "node:zlib";
import process from "node:process";
import { processAlive } from "../../core/process_alive.ts";

/** One file a binary carries. */
export interface PackedFile {
  /** A path node:fs can read (in a Bun binary, `/$bunfs/...`). */
  source: string;
  /** How `source` is stored. */
  encoding: "zstd" | "identity";
  /** SHA-256 (hex) of the unpacked bytes. */
  sha256: string;
  /** Size of the unpacked bytes. */
  size: number;
}

/** What {@link ensureUnpacked} did. */
export type UnpackOutcome = "verified" | "unpacked" | "replaced";

/**
 * How far a file's last change must lie behind a hash for its identity to be trusted afterwards: more
 * than the coarsest timestamps seen (Deno's node:fs reports ctime in whole seconds; kernels tick in ms).
 */
const RACY_MS = 2_000;
/** Identity of each file this process verified, by path. */
const verified = new Map<string, string>();
/** Unpacks in flight in this process, by path: concurrent callers share one. */
const inFlight = new Map<string, Promise<UnpackOutcome>>();

/**
 * Makes `target` hold exactly `file`'s bytes with permission bits `mode`: kept when its digest matches
 * (hashed once per process and again only after it changed), else unpacked through a temporary name and
 * renamed into place. Resolves with what it did; rejects when the carried bytes themselves are wrong.
 */
export function ensureUnpacked(file: PackedFile, target: string, mode: number): Promise<UnpackOutcome> {
  const running = inFlight.get(target);
  if (running) return running;
  const job = ensure(file, target, mode).finally(() => inFlight.delete(target));
  inFlight.set(target, job);
  return job;
}

async function ensure(file: PackedFile, target: string, mode: number): Promise<UnpackOutcome> {
  const before = await lstat(target, { bigint: true }).catch(() => undefined);
  if (before?.isFile() && (Number(before.mode) & 0o777) === mode) {
    const id = identity(before);
    if (verified.get(target) === id) return "verified";
    if (Number(before.size) === file.size) {
      const hashing = Date.now();
      const digest = digestOrNothing(target);
      const after = await lstat(target, { bigint: true }).catch(() => undefined);
      if (digest === file.sha256 && after && identity(after) === id) {
        // Timestamps come from a coarse clock: a write within a tick of the last change leaves the
        // identity as it was (git's "racy" files). Only an identity older than that is trusted later.
        if (Number(after.ctimeNs / 1_000_000n) < hashing - RACY_MS) verified.set(target, id);
        return "verified";
      }
    }
  }
  verified.delete(target);
  await unpack(file, target, mode);
  return before ? "replaced" : "unpacked";
}

/** Writes `file` to a temporary name beside `target`, checks its digest, and renames it into place. */
async function unpack(file: PackedFile, target: string, mode: number): Promise<void> {
  const dir = dirname(target);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await removeStaleTemps(dir, basename(target));
  const temp = `${target}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`;
  const hash = createHash("sha256");
  let size = 0;
  const tap = new Transform({
    transform(chunk: Uint8Array, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    // A Bun binary's embedded files can be read whole, not opened or streamed.
    const source = Readable.from([await readFile(file.source)]);
    // 0600 while writing: nothing may run a half-written executable.
    const sink = createWriteStream(temp, { mode: 0o600 });
    if (file.encoding === "zstd") await pipeline(source, createZstdDecompress(), tap, sink);
    else await pipeline(source, tap, sink);
    const digest = hash.digest("hex");
    if (digest !== file.sha256 || size !== file.size) {
      throw new Error(
        `The copy of "${basename(target)}" inside this codemode binary is damaged (sha256 ${digest}, ` +
          `expected ${file.sha256}): download or build codemode again`,
      );
    }
    await chmod(temp, mode);
    await rename(temp, target);
  } finally {
    await rm(temp, { force: true });
  }
}

/** Removes `<name>.<pid>.<tag>.tmp` files of processes that no longer run (an unpack killed halfway). */
async function removeStaleTemps(dir: string, name: string): Promise<void> {
  const prefix = `${name}.`;
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    if (!entry.startsWith(prefix) || !entry.endsWith(".tmp")) continue;
    const pid = Number(entry.slice(prefix.length).split(".")[0]);
    if (!Number.isInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    await rm(join(dir, entry), { force: true });
  }
}

/**
 * SHA-256 (hex) of a file, read synchronously in 256 KiB blocks: the binary checks ~125 MB before every
 * first launch, and there the async reads' thread hops cost more than hashing (Bun: ~100 ms this way,
 * 150-190 ms with 4 MiB async reads), while a block this size stays in the CPU's cache.
 */
export function sha256File(path: string): string {
  const hash = createHash("sha256");
  const fd = openSync(path, "r");
  const block = new Uint8Array(256 << 10);
  try {
    for (let n; (n = readSync(fd, block, 0, block.length, null)) > 0;) hash.update(block.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return hash.digest("hex");
}

function digestOrNothing(path: string): string | undefined {
  try {
    return sha256File(path);
  } catch {
    return undefined; // gone or unreadable since the lstat: unpacked again
  }
}

/** What changes whenever the file is written, replaced or has its mode changed. */
function identity(s: { dev: bigint; ino: bigint; size: bigint; mtimeNs: bigint; ctimeNs: bigint }): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
}

/** Forgets what this process verified (tests: act like a fresh process). */
export function forgetVerified(): void {
  verified.clear();
}
