/**
 * Whether a node takes new sessions (`/readyz`), and draining: once a node drains it refuses new sessions
 * for good while its live ones are still served (the HTTP server ends them as their work finishes).
 * `/healthz` (liveness) is separate: a draining node is alive, so a balancer keeps routing its existing
 * sessions to it while it sends new ones elsewhere.
 * @module
 */

/** The path of the readiness probe. */
export const READY_PATH = "/readyz";

/** Why a node takes no new session: it drains, or its sandboxes leave no room. */
export type NotReadyReason = "draining" | "full";

/** The body of `GET /readyz`: nothing private, only what a balancer or an operator needs. */
export interface ReadinessBody {
  status: "ready" | "not ready";
  node: string;
  reason?: NotReadyReason;
  /** Live MCP sessions on this node. */
  sessions: number;
}

/** What readiness is judged on. */
export interface ReadinessOptions {
  node: string;
  /** Live MCP sessions. */
  sessions(): number;
  /** Whether a new session could get a sandbox now (CODEMODE_MAX_SESSIONS). */
  room(): boolean;
}

/** A node's readiness, and its one-way switch to draining. */
export class Readiness {
  #options: ReadinessOptions;
  #draining = false;

  constructor(options: ReadinessOptions) {
    this.#options = options;
  }

  /** Whether the node drains (set once, never cleared). */
  get draining(): boolean {
    return this.#draining;
  }

  /** Stops taking new sessions; the live ones are still served. */
  drain(): void {
    this.#draining = true;
  }

  /** The readiness answer and its HTTP status (200 ready, 503 not). */
  check(): { status: 200 | 503; body: ReadinessBody } {
    const reason: NotReadyReason | undefined = this.#draining
      ? "draining"
      : this.#options.room()
      ? undefined
      : "full";
    const body: ReadinessBody = {
      status: reason ? "not ready" : "ready",
      node: this.#options.node,
      ...(reason ? { reason } : {}),
      sessions: this.#options.sessions(),
    };
    return { status: reason ? 503 : 200, body };
  }
}

/**
 * Polls `done` until it says true (resolves true) or `timeoutMs` pass (false). Polled: the work a drain
 * waits for is counted in several places (HTTP requests, sandbox runs), and a drain is not latency-critical.
 */
export async function waitFor(done: () => boolean, timeoutMs: number, pollMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, Math.max(1, deadline - Date.now()))));
  }
  return true;
}
