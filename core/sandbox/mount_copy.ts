/**
 * Mounts for runtimes that cannot bind-mount (Pyodide): the files of each mounted host folder, read here
 * and copied into the sandbox over its channel, within a cap on the bytes copied in all; a read-only
 * mount's files and folders are made read-only there. Only regular files are copied; symlinks are not
 * followed (one could point anywhere on the host), and FIFOs, sockets and devices are skipped without being
 * opened.
 * @module
 */
import { constants, lstat, open, readdir } from "node:fs/promises";
import { join, posix } from "node:path";
import type { SandboxMount } from "../contracts/runtime.ts";
import type { SandboxFile } from "./file_sender.ts";

/** What copying the mounts came to. */
export interface MountCopy {
  files: SandboxFile[];
  /** What was left out, for the first run's result. */
  notes: string[];
  bytes: number;
}

/** Most files copied from all mounts together. */
const MAX_FILES = 10_000;

/** Reads every regular file of `mounts` (host side) up to `capBytes` in all. */
export async function copyMounts(mounts: SandboxMount[], capBytes: number): Promise<MountCopy> {
  const files: SandboxFile[] = [];
  const skipped: string[] = [];
  let overCap = 0;
  let bytes = 0;
  const walk = async (mount: SandboxMount, rel: string): Promise<void> => {
    let names: string[];
    try {
      names = (await readdir(join(mount.host, rel))).sort();
    } catch {
      skipped.push(`${posix.join(mount.target, rel)} (unreadable)`);
      return;
    }
    // After its files, so a read-only folder is sealed once they are in; empty folders come along too.
    const folder = {
      path: posix.join(mount.target, rel),
      data: new Uint8Array(0),
      readOnly: mount.readOnly,
      directory: true,
    };
    for (const name of names) {
      const relPath = rel ? `${rel}/${name}` : name;
      const target = posix.join(mount.target, relPath);
      const info = await lstat(join(mount.host, relPath)).catch(() => undefined);
      if (!info) continue;
      if (info.isDirectory()) {
        await walk(mount, relPath);
      } else if (!info.isFile()) {
        skipped.push(`${target} (${info.isSymbolicLink() ? "a symlink" : "not a regular file"})`);
      } else if (files.length >= MAX_FILES || bytes + info.size > capBytes) {
        overCap++;
      } else {
        const data = await readRegular(join(mount.host, relPath));
        if (!data) {
          skipped.push(`${target} (unreadable)`);
          continue;
        }
        bytes += data.length;
        files.push({ path: target, data, readOnly: mount.readOnly });
      }
    }
    files.push(folder);
  };
  for (const mount of mounts) await walk(mount, "");
  const notes: string[] = [];
  if (overCap) {
    notes.push(
      `${overCap} mounted file(s) were not copied into the Pyodide sandbox: they would pass the ` +
        `${(capBytes / 2 ** 20).toFixed(1)} MiB it copies in all (CODEMODE_MAX_MOUNT_COPY)`,
    );
  }
  if (skipped.length) {
    notes.push(
      `mounted entries not copied into the Pyodide sandbox: ${skipped.slice(0, 10).join(", ")}${
        skipped.length > 10 ? `, and ${skipped.length - 10} more` : ""
      }`,
    );
  }
  if (mounts.some((m) => !m.readOnly)) {
    notes.push("under Pyodide, mounts are copies: changes to an rw mount stay in the sandbox");
  }
  return { files, notes, bytes };
}

/** A file's bytes, opened without following a symlink and only if it is still a regular file. */
async function readRegular(path: string): Promise<Uint8Array | undefined> {
  try {
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      if (!(await handle.stat()).isFile()) return undefined;
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch {
    return undefined;
  }
}
