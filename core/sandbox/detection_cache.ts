/**
 * Each runtime's detection verdict (available or not, version, rootless, whether the probe container
 * passed), kept in the state directory so a start does not pay for `podman info`, the image check and a
 * probe container every time. A verdict is used while its key holds: codemode's version and the
 * plugin's fingerprint (for a container engine: its binary's path, size and mtime, and the image id). A
 * "works" verdict that then fails to start a session is dropped by the caller; a "does not work" verdict
 * also expires after an hour, since fixing an engine's configuration changes no key (`codemode doctor`
 * records its fresh verdicts at once).
 * @module
 */
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { RuntimeDetection } from "../contracts/runtime.ts";
import { log } from "../observe/log.ts";

/** The cache file's name in the state directory. */
export const DETECTION_CACHE_FILE = "runtime-detection.json";

/** How long a "does not work" verdict is trusted. */
export const NEGATIVE_TTL_MS = 60 * 60 * 1000;

interface Entry {
  key: string;
  /** When it was detected (ms since the epoch). */
  at: number;
  detection: RuntimeDetection;
}

interface CacheFile {
  entries: Record<string, Entry>;
}

/** Options of a {@link DetectionCache}. */
export interface DetectionCacheOptions {
  /** The clock, for tests. */
  now?: () => number;
  negativeTtlMs?: number;
}

/** The detection cache of one state directory. */
export class DetectionCache {
  readonly path: string;
  #version: string;
  #now: () => number;
  #negativeTtlMs: number;

  /** A cache in `stateDir` for codemode `version`; nothing is read or written yet. */
  constructor(stateDir: string, version: string, options: DetectionCacheOptions = {}) {
    this.path = join(stateDir, DETECTION_CACHE_FILE);
    this.#version = version;
    this.#now = options.now ?? Date.now;
    this.#negativeTtlMs = options.negativeTtlMs ?? NEGATIVE_TTL_MS;
  }

  /** The cached verdict for `runtime` if it was made under the same `fingerprint` and is still fresh. */
  async get(runtime: string, fingerprint: string): Promise<RuntimeDetection | undefined> {
    const entry = (await this.#read()).entries[runtime];
    if (!entry || entry.key !== this.#key(fingerprint)) return undefined;
    if (!entry.detection.available && this.#now() - entry.at > this.#negativeTtlMs) return undefined;
    return entry.detection;
  }

  /** Records a fresh verdict for `runtime` under `fingerprint`. Never throws (a cache is optional). */
  async set(runtime: string, fingerprint: string, detection: RuntimeDetection): Promise<void> {
    await this.#update((file) => {
      file.entries[runtime] = { key: this.#key(fingerprint), at: this.#now(), detection };
    });
  }

  /** Forgets `runtime`'s verdict, so the next selection detects it afresh. Never throws. */
  async drop(runtime: string): Promise<void> {
    await this.#update((file) => {
      delete file.entries[runtime];
    });
  }

  #key(fingerprint: string): string {
    return `codemode ${this.#version}; ${fingerprint}`;
  }

  async #read(): Promise<CacheFile> {
    try {
      const parsed = JSON.parse(await readFile(this.path, "utf8"));
      if (parsed && typeof parsed.entries === "object" && parsed.entries) return parsed as CacheFile;
    } catch { /* missing or damaged: an empty cache */ }
    return { entries: {} };
  }

  // Read, change, write through a temporary name: a concurrent codemode at worst loses one verdict.
  async #update(change: (file: CacheFile) => void): Promise<void> {
    const temp = `${this.path}.${process.pid}.${Math.random().toString(36).slice(2, 8)}.tmp`;
    try {
      const file = await this.#read();
      change(file);
      await mkdir(dirname(this.path), { recursive: true });
      await writeFile(temp, JSON.stringify(file, null, 2) + "\n", { mode: 0o600 });
      await rename(temp, this.path);
    } catch (error) {
      log.warn("could not write the runtime detection cache", { path: this.path, error: String(error) });
    } finally {
      await rm(temp, { force: true }).catch(() => {});
    }
  }
}
