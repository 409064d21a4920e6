/**
 * Containers whose removal failed because the engine CLI was missing or broken at the time. A sandbox
 * spinning in Python does not stop when its engine client is killed (conmon or the daemon keeps it), so
 * the removal is retried until it succeeds: on demand, on a backoff timer, and once more at shutdown.
 * @module
 */

import { clearTimeout, setTimeout } from "node:timers";
import { log } from "../../core/observe/log.ts";

/** Retry timing of `PendingRemovals`. */
export interface PendingRemovalsOptions {
  /** Delay before the first timed retry after a failure; it doubles after each failed pass. */
  firstDelayMs?: number;
  /** Longest delay between timed retries. */
  maxDelayMs?: number;
}

/** Defaults of `PendingRemovalsOptions`. */
export const defaults: Required<PendingRemovalsOptions> = { firstDelayMs: 1_000, maxDelayMs: 30_000 };

/** The set of container names still to remove, with the retries that empty it. */
export class PendingRemovals {
  readonly #names = new Set<string>();
  readonly #remove: (name: string) => Promise<void>;
  readonly #options: Required<PendingRemovalsOptions>;
  #delayMs: number;
  #timer?: ReturnType<typeof setTimeout>;
  #pass?: Promise<void>;

  /** `remove` force-removes one container and rejects when the engine could not do it. */
  constructor(remove: (name: string) => Promise<void>, options: PendingRemovalsOptions = {}) {
    this.#remove = remove;
    this.#options = { ...defaults, ...options };
    this.#delayMs = this.#options.firstDelayMs;
  }

  /** Number of containers still to remove. */
  get size(): number {
    return this.#names.size;
  }

  /** Remembers `name` after its removal failed with `error`, and schedules a retry. */
  add(name: string, error: unknown): void {
    if (!this.#names.has(name)) {
      log.warn("could not remove a sandbox container; retrying until the engine works again", {
        container: name,
        error: String(error),
      });
    }
    this.#names.add(name);
    this.#delayMs = this.#options.firstDelayMs;
    this.#schedule();
  }

  /** Tries every pending removal once; concurrent calls share one pass. */
  retry(): Promise<void> {
    if (this.#names.size === 0) return Promise.resolve();
    return this.#pass ??= (async () => {
      try {
        for (const name of [...this.#names]) {
          try {
            await this.#remove(name);
            this.#names.delete(name);
            log.info("removed a sandbox container whose removal had failed", { container: name });
          } catch {
            // still pending: the timer tries again
          }
        }
      } finally {
        this.#pass = undefined;
        this.#schedule();
      }
    })();
  }

  /** Retries until nothing is pending or `timeoutMs` have passed (for shutdown); true when none is left. */
  async flush(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.#names.size > 0 && Date.now() < deadline) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<void>((resolve) => timer = setTimeout(resolve, deadline - Date.now()));
      await Promise.race([this.retry(), late]);
      clearTimeout(timer);
      const pause = Math.min(250, deadline - Date.now());
      if (this.#names.size > 0 && pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    }
    return this.#names.size === 0;
  }

  #schedule(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#names.size === 0 || this.#pass) return;
    const delay = this.#delayMs;
    this.#delayMs = Math.min(delay * 2, this.#options.maxDelayMs);
    this.#timer = setTimeout(() => void this.retry(), delay);
    // Pending removals alone must not keep a finished host process alive; shutdown flushes them instead.
    this.#timer.unref();
  }
}
