/**
 * Files only this user may read or write: the activity a `serve` publishes holds code, output and tool
 * arguments, and the answers the dashboard sends a `serve` decide what its runs may do. Folders are made
 * 0700 and files 0600, written whole and renamed into place; a file is trusted only when it is a regular
 * file (not a link) owned by this user that nobody else can read or write, so a file planted by another
 * local user in a shared or loosened folder is refused.
 * @module
 */
import { constants, type Stats as FileStats } from "node:fs";
import { chmod, lstat, mkdir, open, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";

/** This process's user id (undefined where the platform has none: every file then passes). */
export function currentUid(): number | undefined {
  return typeof process.getuid === "function" ? process.getuid() : undefined;
}

/** Why `stat` (from lstat or fstat) cannot be trusted as this user's private file or folder, or undefined. */
export function privateProblem(stat: FileStats, kind: "file" | "folder"): string | undefined {
  if (stat.isSymbolicLink()) return "it is a symbolic link";
  if (kind === "file" && !stat.isFile()) return "it is not a regular file";
  if (kind === "folder" && !stat.isDirectory()) return "it is not a folder";
  const uid = currentUid();
  if (uid !== undefined && stat.uid !== uid) {
    return `it belongs to uid ${stat.uid}, not to this user (${uid})`;
  }
  if (stat.mode & 0o077) return `its mode ${(stat.mode & 0o777).toString(8)} lets other users in`;
  return undefined;
}

/** An error for a file or folder that is not this user's private one. */
export class NotPrivateError extends Error {
  /** Names the path and why it was refused. */
  constructor(readonly path: string, reason: string) {
    super(`Refused "${path}": ${reason}`);
    this.name = "NotPrivateError";
  }
}

/**
 * Makes `dir` (and missing parents) and ensures it is this user's and closed to others: a folder of ours
 * with a looser mode is tightened to 0700; anything else (another user's, a link) throws NotPrivateError.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stat = await lstat(dir);
  const problem = privateProblem(stat, "folder");
  if (!problem) return;
  const uid = currentUid();
  if (stat.isDirectory() && !stat.isSymbolicLink() && (uid === undefined || stat.uid === uid)) {
    await chmod(dir, 0o700);
    return;
  }
  throw new NotPrivateError(dir, problem);
}

/**
 * Writes `data` to `path` as a 0600 file, whole: a temporary file renamed into place. `sync` flushes it
 * to disk before the rename, for files whose loss costs more than the write (credentials).
 */
export async function writePrivateFile(
  path: string,
  data: string | Uint8Array,
  options: { sync?: boolean } = {},
): Promise<void> {
  const temporary = join(dirname(path), `.${Math.random().toString(36).slice(2, 10)}.tmp`);
  // O_EXCL and O_NOFOLLOW: a name someone else planted is never followed or reused.
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);
  const handle = await open(temporary, flags, 0o600);
  try {
    await handle.writeFile(data);
    if (options.sync) await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** Reads `path` if it is this user's private file; throws NotPrivateError if not, the fs error if missing. */
export async function readPrivateFile(path: string, from = 0, max = Infinity): Promise<Uint8Array> {
  const handle = await open(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  try {
    const stat = await handle.stat();
    const problem = privateProblem(stat, "file");
    if (problem) throw new NotPrivateError(path, problem);
    const length = Math.max(0, Math.min(stat.size - from, max));
    const buffer = new Uint8Array(length);
    let read = 0;
    while (read < length) {
      const { bytesRead } = await handle.read(buffer, read, length - read, from + read);
      if (!bytesRead) break;
      read += bytesRead;
    }
    return buffer.subarray(0, read);
  } finally {
    await handle.close();
  }
}
