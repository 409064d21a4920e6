/**
 * A run's deadline that stops while the run waits for a person. Approval questions hold it: the first
 * hold stops the clock (and tells the sandbox to stop its own, through `onPause`), the last release
 * starts it again with the time that was left. Only the host holds it; nothing the sandbox sends can.
 * @module
 */

/** How a clock tells the sandbox to stop and restart its own watchdog. */
export interface RunClockHooks {
  onPause(): void;
  onResume(): void;
}

/** A deadline `ms` from now that pauses while held. */
export class RunClock {
  /** Resolves once the time, minus the paused spans, has run out. */
  readonly expired: Promise<"deadline">;
  #hooks: RunClockHooks;
  #expire!: () => void;
  #timer?: ReturnType<typeof setTimeout>;
  #endsAt: number;
  #left = 0;
  #holds = 0;
  #extendedMs = 0;
  #stopped = false;
  /** Milliseconds spent paused so far. */
  pausedMs = 0;
  #pausedAt = 0;

  /** Starts the clock. */
  constructor(ms: number, hooks: RunClockHooks) {
    this.#hooks = hooks;
    this.expired = new Promise((resolve) => (this.#expire = () => resolve("deadline")));
    this.#endsAt = performance.now() + ms;
    this.#arm(ms);
  }

  /** Whether a hold is in force. */
  get paused(): boolean {
    return this.#holds > 0;
  }

  /** Runs `wait` with the clock stopped; the clock restarts when the last concurrent hold ends. */
  async during<T>(wait: () => Promise<T>): Promise<T> {
    this.#hold();
    try {
      return await wait();
    } finally {
      this.#release();
    }
  }

  /**
   * Moves the deadline to at least `ms` from now (while the run is still sending something the host
   * waits for), by at most `budgetMs` in all over the run. A paused clock needs no extension.
   */
  extend(ms: number, budgetMs: number): void {
    if (this.#stopped || this.#holds > 0) return;
    const now = performance.now();
    const endsAt = Math.min(Math.max(this.#endsAt, now + ms), this.#endsAt + budgetMs - this.#extendedMs);
    if (endsAt <= this.#endsAt) return;
    this.#extendedMs += endsAt - this.#endsAt;
    this.#endsAt = endsAt;
    clearTimeout(this.#timer);
    this.#arm(endsAt - now);
  }

  /** Stops the clock for good (the run ended). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #hold(): void {
    if (this.#holds++ > 0 || this.#stopped) return;
    clearTimeout(this.#timer);
    this.#pausedAt = performance.now();
    this.#left = Math.max(0, this.#endsAt - this.#pausedAt);
    this.#hooks.onPause();
  }

  #release(): void {
    if (--this.#holds > 0 || this.#stopped) return;
    const now = performance.now();
    this.pausedMs += now - this.#pausedAt;
    this.#endsAt = now + this.#left;
    this.#arm(this.#left);
    this.#hooks.onResume();
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => this.#expire(), ms);
  }
}
