/**
 * Who is watching: a dashboard with a page open leaves `watch-<its pid>.json` under the activity folder
 * (0600, rewritten every few seconds while a page is open, removed when the last one closes), naming the
 * serves it shows. A serve whose MCP client cannot be asked for an approval looks here: when a live page
 * shows it, the question waits for an answer on that page instead of being refused at once.
 * @module
 */
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { activityDir } from "./activity_file.ts";
import { ensurePrivateDir, readPrivateFile, writePrivateFile } from "./private_files.ts";
import { processAlive } from "../process_alive.ts";

/** Milliseconds between rewrites of a marker while pages are open. */
const HEARTBEAT_MS = 5_000;
/** A marker older than this is stale (its dashboard hangs or its clock stopped): nobody is watching. */
const STALE_MS = 20_000;
const MARKER = /^watch-(\d+)\.json$/;

/** What a marker says. */
interface Marker {
  pid: number;
  /** The only serve it shows (serve --http's own page), or undefined for every serve (codemode ui). */
  only?: number;
  /** Pages open. */
  pages: number;
  /** Milliseconds since the epoch when it was written. */
  at: number;
}

/** This process's marker: present while it has pages open. */
export class WatchMarker {
  readonly path: string;
  #stateDir: string;
  #only?: number;
  #pages = 0;
  #timer?: ReturnType<typeof setInterval>;
  #chain: Promise<void> = Promise.resolve();

  /** The marker of a dashboard under `stateDir` showing every serve, or only serve `only`. */
  constructor(stateDir: string, options: { only?: number } = {}) {
    this.#stateDir = stateDir;
    this.#only = options.only;
    this.path = join(activityDir(stateDir), `watch-${process.pid}.json`);
  }

  /** Says how many pages are open now: the marker is written (and kept fresh) while any is, removed when none. */
  pages(count: number): Promise<void> {
    const was = this.#pages;
    this.#pages = count;
    if (count > 0 && !this.#timer) {
      this.#timer = setInterval(() => void this.#write(), HEARTBEAT_MS);
      (this.#timer as { unref?: () => void }).unref?.();
    }
    if (count === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      if (was > 0) return this.#step(() => rm(this.path, { force: true }));
      return this.#chain;
    }
    return this.#write();
  }

  /** Removes the marker for good. */
  close(): Promise<void> {
    return this.pages(0);
  }

  #write(): Promise<void> {
    return this.#step(async () => {
      if (!this.#pages) return;
      const marker: Marker = {
        pid: process.pid,
        ...(this.#only !== undefined ? { only: this.#only } : {}),
        pages: this.#pages,
        at: Date.now(),
      };
      await ensurePrivateDir(activityDir(this.#stateDir));
      await writePrivateFile(this.path, JSON.stringify(marker));
    });
  }

  #step(fn: () => Promise<unknown>): Promise<void> {
    this.#chain = this.#chain.then(fn).then(() => {}, () => {});
    return this.#chain;
  }
}

/**
 * Whether a live dashboard page shows serve `pid` now: a fresh, private marker of a running process that
 * shows every serve or this one. Markers of processes that are gone are removed.
 */
export async function watched(stateDir: string, pid: number, now = Date.now()): Promise<boolean> {
  const dir = activityDir(stateDir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return false;
  }
  for (const name of names) {
    const match = MARKER.exec(name);
    if (!match) continue;
    const owner = Number(match[1]);
    let marker: Partial<Marker> | undefined;
    try {
      marker = JSON.parse(new TextDecoder().decode(await readPrivateFile(join(dir, name), 0, 4096)));
    } catch {
      continue; // missing, not this user's private file, or half written: not a watcher
    }
    if (!processAlive(owner)) {
      await rm(join(dir, name), { force: true }).catch(() => {});
      continue;
    }
    const fresh = typeof marker?.at === "number" && now - marker.at < STALE_MS && (marker.pages ?? 0) > 0;
    const shows = marker?.only === undefined || marker.only === pid;
    if (marker?.pid === owner && fresh && shows) return true;
  }
  return false;
}
