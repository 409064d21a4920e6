/**
 * The serves the dashboard shows, read from what each publishes under `<stateDir>/activity/`: their
 * state files and the tail of their event logs (following a rotation without losing the events written
 * just before it). Polled while someone watches; files of processes that are gone are removed, and files
 * that are not this user's private ones are refused (and said so once).
 * @module
 */
import { lstat, readdir, rm } from "node:fs/promises";
import type { ActivityEvent } from "../observe/activity.ts";
import { activityDir, activityFiles, type InboxMessage, sendToInbox } from "../observe/activity_file.ts";
import { NotPrivateError, readPrivateFile } from "../observe/private_files.ts";
import type { ServeState } from "../observe/serve_state.ts";
import { log } from "../observe/log.ts";
import { processAlive } from "../process_alive.ts";

/** One serve as the dashboard knows it. */
export interface ServeView {
  pid: number;
  state: ServeState;
  /** Its most recent events, oldest first. */
  events: ActivityEvent[];
}

/** A change the dashboard pushes to open pages. */
export type LiveUpdate =
  | { type: "serve"; pid: number; state: ServeState }
  | { type: "events"; pid: number; events: ActivityEvent[] }
  | { type: "gone"; pid: number };

/** Options of {@link LiveServes}. */
export interface LiveServesOptions {
  /** Only serves whose pid passes (serve --http shows itself alone). */
  only?: (pid: number) => boolean;
  /** Milliseconds between polls while someone watches. */
  intervalMs?: number;
  /** Events kept per serve. */
  maxEvents?: number;
}

interface Tail {
  ino?: number;
  offset: number;
  /** Bytes after the last newline read so far: the start of a line still being written. */
  partial: Uint8Array;
}

interface Known {
  view: ServeView;
  stateText: string;
  tail: Tail;
}

/** Most bytes read from one event file in one poll: a serve that wrote more is caught up over several. */
const MAX_READ = 16 * 1024 * 1024;

/** The live serves under one state dir. */
export class LiveServes {
  readonly stateDir: string;
  #options: Required<Omit<LiveServesOptions, "only">> & Pick<LiveServesOptions, "only">;
  #known = new Map<number, Known>();
  #listeners = new Set<(update: LiveUpdate) => void>();
  #timer?: ReturnType<typeof setInterval>;
  #polling?: Promise<void>;
  #refused = new Set<string>();

  /** Reads `<stateDir>/activity/`; nothing is read until `refresh()` or a subscriber. */
  constructor(stateDir: string, options: LiveServesOptions = {}) {
    this.stateDir = stateDir;
    this.#options = { intervalMs: 250, maxEvents: 2000, ...options };
  }

  /** The serves known now, ordered by pid. */
  serves(): ServeView[] {
    return [...this.#known.values()].map((k) => k.view).sort((a, b) => a.pid - b.pid);
  }

  /** Hears every change; the first listener starts polling, the last one to leave stops it. */
  subscribe(listener: (update: LiveUpdate) => void): () => void {
    this.#listeners.add(listener);
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.refresh(), this.#options.intervalMs);
      (this.#timer as { unref?: () => void }).unref?.();
    }
    return () => {
      this.#listeners.delete(listener);
      if (!this.#listeners.size) this.close();
    };
  }

  /** Stops polling. */
  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Reads what changed since the last call; concurrent callers share one read. */
  refresh(): Promise<void> {
    this.#polling ??= this.#poll().finally(() => (this.#polling = undefined));
    return this.#polling;
  }

  /** Leaves `message` for serve `pid`; false when no such serve is shown. */
  async send(pid: number, message: InboxMessage): Promise<boolean> {
    if (!this.#known.has(pid)) await this.refresh();
    if (!this.#known.has(pid)) return false;
    await sendToInbox(this.stateDir, pid, message);
    return true;
  }

  async #poll(): Promise<void> {
    const pids = await this.#livePids();
    for (const pid of [...this.#known.keys()]) {
      if (pids.includes(pid)) continue;
      this.#known.delete(pid);
      this.#emit({ type: "gone", pid });
    }
    for (const pid of pids) {
      try {
        await this.#read(pid);
      } catch (error) {
        this.#refuse(`${pid}`, error);
      }
    }
  }

  /** Pids with a state file whose process runs; the files of dead ones are removed. */
  async #livePids(): Promise<number[]> {
    let names: string[];
    try {
      names = await readdir(activityDir(this.stateDir));
    } catch {
      return [];
    }
    const pids: number[] = [];
    for (const name of names) {
      const match = /^(\d+)\.json$/.exec(name);
      if (!match) continue;
      const pid = Number(match[1]);
      if (this.#options.only && !this.#options.only(pid)) continue;
      if (processAlive(pid)) pids.push(pid);
      else await this.#removeDead(pid);
    }
    return pids;
  }

  async #removeDead(pid: number): Promise<void> {
    const files = activityFiles(this.stateDir, pid);
    for (const path of Object.values(files)) {
      // Only our own leftovers; a planted file (or link) is left where it is.
      const stat = await lstat(path).catch(() => undefined);
      const ours = stat && !stat.isSymbolicLink() && stat.uid === process.getuid?.();
      if (ours) await rm(path, { force: true, recursive: true }).catch(() => {});
    }
  }

  async #read(pid: number): Promise<void> {
    const files = activityFiles(this.stateDir, pid);
    const stateText = new TextDecoder().decode(await readPrivateFile(files.state));
    let known = this.#known.get(pid);
    if (!known || known.stateText !== stateText) {
      let state: ServeState;
      try {
        state = JSON.parse(stateText);
      } catch {
        return; // replaced while we read it: the next poll reads the new one
      }
      if (!known) {
        known = {
          view: { pid, state, events: [] },
          stateText,
          tail: { offset: 0, partial: new Uint8Array() },
        };
        this.#known.set(pid, known);
      } else {
        known.view.state = state;
        known.stateText = stateText;
      }
      this.#emit({ type: "serve", pid, state });
    }
    const events = await this.#tail(known.tail, files.events, files.rotated);
    if (!events.length) return;
    const kept = known.view.events;
    kept.push(...events);
    if (kept.length > this.#options.maxEvents) kept.splice(0, kept.length - this.#options.maxEvents);
    this.#emit({ type: "events", pid, events });
  }

  /** New events since the last read; after a rotation, the rest of the old file first. */
  async #tail(tail: Tail, path: string, rotated: string): Promise<ActivityEvent[]> {
    const stat = await lstat(path).catch(() => undefined);
    if (!stat) return [];
    const chunks: Uint8Array[] = [tail.partial];
    if (tail.ino !== stat.ino) {
      const old = await lstat(rotated).catch(() => undefined);
      // Unseen file: start with the rotated one (if any) in full; seen file rotated: read its rest.
      if (old && (tail.ino === undefined || old.ino === tail.ino)) {
        chunks.push(await readPrivateFile(rotated, tail.ino === undefined ? 0 : tail.offset, MAX_READ));
      }
      tail.ino = stat.ino;
      tail.offset = 0;
    }
    if (stat.size < tail.offset) tail.offset = 0;
    if (stat.size > tail.offset) {
      const bytes = await readPrivateFile(path, tail.offset, MAX_READ);
      tail.offset += bytes.length;
      chunks.push(bytes);
    }
    const all = concat(chunks);
    const end = all.lastIndexOf(10);
    tail.partial = all.slice(end + 1);
    if (end < 0) return [];
    const events: ActivityEvent[] = [];
    for (const line of new TextDecoder().decode(all.subarray(0, end)).split("\n")) {
      if (!line) continue;
      try {
        events.push(JSON.parse(line));
      } catch { /* lines are appended whole; a damaged one is skipped */ }
    }
    return events;
  }

  #refuse(what: string, error: unknown): void {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return; // gone between listing and reading
    const message = error instanceof NotPrivateError ? error.message : String(error);
    if (this.#refused.has(message)) return;
    this.#refused.add(message);
    log.warn("the dashboard skipped a serve's activity", { serve: what, reason: message });
  }

  #emit(update: LiveUpdate): void {
    for (const listener of this.#listeners) {
      try {
        listener(update);
      } catch { /* one page's failure must not stop the others */ }
    }
  }
}

function concat(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}
