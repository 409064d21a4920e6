/**
 * Run slots: at most `max` runs execute at once across all sessions; the others wait in arrival order.
 * A waiter gives up at its deadline or when its signal aborts, so a queued run never outlives its
 * timeout, and the queue is bounded by the runs that are still within theirs.
 * @module
 */

/** Gives a slot back; calling it twice is harmless. */
export type Release = () => void;

interface Waiter {
  grant(): void;
}

/** A counting semaphore for runs, first come first served. */
export class RunSlots {
  readonly max?: number;
  #running = 0;
  #waiters: Waiter[] = [];

  /** Slots for `max` runs at once; undefined means no cap. */
  constructor(max?: number) {
    this.max = max;
  }

  /** Runs holding a slot. */
  get running(): number {
    return this.#running;
  }

  /** Runs waiting for one. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** True when a run asking now would have to wait. */
  get full(): boolean {
    return this.max !== undefined && this.#running >= this.max;
  }

  /**
   * Takes a slot, waiting at most `ms`. Resolves to the release function, or undefined when the wait
   * timed out or `signal` aborted first (the caller then must not run).
   */
  acquire(ms: number, signal?: AbortSignal): Promise<Release | undefined> {
    if (signal?.aborted) return Promise.resolve(undefined);
    if (!this.full) {
      this.#running++;
      return Promise.resolve(this.#release());
    }
    return new Promise((resolve) => {
      const giveUp = () => {
        cleanup();
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(undefined);
      };
      const timer = setTimeout(giveUp, Math.max(0, ms));
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", giveUp);
      };
      const waiter: Waiter = {
        grant: () => {
          cleanup();
          this.#running++;
          resolve(this.#release());
        },
      };
      signal?.addEventListener("abort", giveUp, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #release(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running--;
      this.#waiters.shift()?.grant();
    };
  }
}
