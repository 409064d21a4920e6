/**
 * The state directory's stamp, `codemode-state.json`: the layout (`format`) its files are in and the
 * codemode version that stamped it in that format. A codemode meeting a directory in a newer format than its own
 * refuses it with an error that names both versions, instead of misreading files a later version wrote
 * (tool-doc caches, OAuth tokens, skills, snapshots). Versions that share a format share a directory, so
 * going back a version without a format change loses nothing.
 * @module
 */
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";

/** The state directory layout this codemode reads and writes; raised by a change older versions would misread. */
export const STATE_FORMAT = 1;

/** The stamp's file name in the state directory. */
export const STAMP_FILE = "codemode-state.json";

/** What the stamp records. */
export interface StateStamp {
  format: number;
  /** The codemode version that stamped the directory in this format. */
  version: string;
}

/** A state directory in a newer format than this codemode's. */
export class NewerStateError extends Error {
  constructor(readonly stateDir: string, readonly stamp: StateStamp, version: string) {
    super(
      `The state directory "${stateDir}" was written by codemode ${stamp.version} (state format ` +
        `${stamp.format}), which this codemode ${version} (format ${STATE_FORMAT}) cannot read: upgrade ` +
        `codemode to ${stamp.version} or later, or give this one another directory (CODEMODE_STATE_DIR)`,
    );
    this.name = "NewerStateError";
  }
}

/** The stamp of `stateDir`: undefined when there is none; a stamp it cannot parse reads as a newer format. */
export async function readStateStamp(stateDir: string): Promise<StateStamp | undefined> {
  let text: string;
  try {
    text = await readFile(join(stateDir, STAMP_FILE), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const data = JSON.parse(text) as Partial<StateStamp>;
    if (Number.isSafeInteger(data.format) && typeof data.version === "string") {
      return { format: data.format!, version: data.version.slice(0, 64) };
    }
  } catch { /* not JSON: below */ }
  // Unreadable is not "absent": overwriting it could hide a newer codemode's directory.
  return { format: Number.MAX_SAFE_INTEGER, version: "unknown (unreadable stamp)" };
}

/** Throws NewerStateError when `stamp` is in a newer format than this codemode's. */
export function checkStateStamp(stateDir: string, stamp: StateStamp | undefined, version: string): void {
  if (stamp && stamp.format > STATE_FORMAT) throw new NewerStateError(stateDir, stamp, version);
}

/**
 * Claims `stateDir` for this codemode `version`: refuses a newer format (NewerStateError), and writes the
 * stamp when there is none or it names an older format (creating the directory, 0700). A directory that
 * cannot be written is left as it is: what needs to write there reports that (and doctor checks it).
 */
export async function claimStateDir(stateDir: string, version: string): Promise<void> {
  const stamp = await readStateStamp(stateDir).catch(() => undefined);
  checkStateStamp(stateDir, stamp, version);
  if (stamp?.format === STATE_FORMAT) return;
  const path = join(stateDir, STAMP_FILE);
  const temp = `${path}.${process.pid}.tmp`;
  try {
    await mkdir(stateDir, { recursive: true, mode: 0o700 });
    await writeFile(temp, JSON.stringify({ format: STATE_FORMAT, version }) + "\n", { mode: 0o600 });
    await rename(temp, path);
  } catch {
    /* not writable: see above */
  } finally {
    await rm(temp, { force: true }).catch(() => {});
  }
}
