/**
 * Stats shared across processes: each serving codemode writes its snapshot to `<stateDir>/stats/<pid>.json`
 * (at most once a second, and only when something changed; written whole and renamed into place, so a
 * reader never sees half a file; mode 0600, as they name the user's servers and tools) and removes it when
 * it stops. `codemode stats` reads the files of processes that still run.
 * @module
 */
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type Stats, stats as processStats, type StatsSnapshot } from "./stats.ts";
import { log } from "./log.ts";
import { processAlive } from "../process_alive.ts";

/** The folder the snapshots live in. */
export function statsDir(stateDir: string): string {
  return join(stateDir, "stats");
}

/** Options of a {@link StatsPublisher}. */
export interface StatsPublisherOptions {
  /** Milliseconds between checks for changes. */
  intervalMs?: number;
  /** The figures to publish (the process-wide ones by default). */
  stats?: Stats;
}

/** Keeps this process's snapshot file up to date until stopped. */
export class StatsPublisher {
  readonly file: string;
  #dir: string;
  #stats: Stats;
  #intervalMs: number;
  #timer?: ReturnType<typeof setInterval>;
  #written = -1;
  #writing?: Promise<void>;
  #stopped = false;

  /** Publishes into `<stateDir>/stats/`; nothing is written until `start()`. */
  constructor(stateDir: string, options: StatsPublisherOptions = {}) {
    this.#dir = statsDir(stateDir);
    this.file = join(this.#dir, `${process.pid}.json`);
    this.#stats = options.stats ?? processStats;
    this.#intervalMs = options.intervalMs ?? 1000;
  }

  /** Writes a first snapshot now (so the process shows up at once), then checks on a timer. */
  start(): void {
    if (this.#timer) return;
    void this.#tick();
    this.#timer = setInterval(() => void this.#tick(), this.#intervalMs);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Writes the current snapshot if it changed since the last write; resolves when it is on disk. */
  async publish(): Promise<void> {
    await this.#tick();
  }

  /** Stops publishing and removes the file. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#writing;
    await rm(this.file, { force: true }).catch(() => {});
  }

  #tick(): Promise<void> {
    if (this.#stopped || this.#writing || this.#stats.changes === this.#written) {
      return this.#writing ?? Promise.resolve();
    }
    const changes = this.#stats.changes;
    this.#writing = this.#stats.snapshot()
      .then((snapshot) => this.#write(snapshot))
      .then(() => void (this.#written = changes))
      .catch((error) =>
        log.debug("could not write the stats file", { file: this.file, error: String(error) })
      )
      .finally(() => (this.#writing = undefined));
    return this.#writing;
  }

  async #write(snapshot: StatsSnapshot): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    const temporary = `${this.file}.${Math.random().toString(36).slice(2, 8)}.tmp`;
    await writeFile(temporary, JSON.stringify(snapshot), { mode: 0o600 });
    await rename(temporary, this.file);
    // stop() may have run while this write was under way: it must not leave the file behind.
    if (this.#stopped) await rm(this.file, { force: true });
  }
}

/** The snapshots of serving processes that still run; files of dead ones are removed. */
export async function readLiveSnapshots(stateDir: string): Promise<StatsSnapshot[]> {
  const dir = statsDir(stateDir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const snapshots: StatsSnapshot[] = [];
  for (const name of names.filter((n) => /^\d+\.json$/.test(n)).sort()) {
    const pid = Number(name.slice(0, -5));
    const file = join(dir, name);
    if (!processAlive(pid)) {
      await rm(file, { force: true }).catch(() => {});
      continue;
    }
    try {
      snapshots.push(JSON.parse(await readFile(file, "utf8")) as StatsSnapshot);
    } catch { /* replaced or removed while we read it */ }
  }
  return snapshots;
}
