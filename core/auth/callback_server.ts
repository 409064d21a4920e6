/**
 * The loopback end of a login (RFC 8252): an HTTP listener on 127.0.0.1 that waits for the authorization
 * server to send the browser back with a code. A callback whose `state` is not this login's is refused
 * (400) and ignored, so a forged or stale redirect can neither complete nor end the login.
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { CALLBACK_PATH } from "./oauth_provider.ts";

/** What came back to the redirect URL. */
export interface Callback {
  code: string;
  /** The RFC 9207 issuer parameter, when the server sends one. */
  iss?: string;
  /** Answers the browser once the code has been exchanged. */
  finish(ok: boolean, message: string): void;
}

/** A listening loopback redirect endpoint. */
export class CallbackServer {
  /** The redirect URL to register and send. */
  readonly url: string;
  #server: Server;
  #expected?: string;
  /** Settled by the first valid callback, which may arrive before anyone waits for it. */
  #answer?: { promise: Promise<Callback>; resolve: (c: Callback) => void; reject: (e: Error) => void };
  #onRefused?: (reason: string) => void;

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.url = `http://127.0.0.1:${port}${CALLBACK_PATH}`;
  }

  /** Listens on 127.0.0.1 at `port` (0: any free one); a taken port is a clear error. */
  static async start(port = 0, onRefused?: (reason: string) => void): Promise<CallbackServer> {
    const ref: { instance?: CallbackServer } = {};
    const server = createServer((req, res) => ref.instance?.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", (error: NodeJS.ErrnoException) =>
        reject(
          error.code === "EADDRINUSE"
            ? new Error(
              `Port ${port} on 127.0.0.1 is in use, so the login cannot receive its redirect there; ` +
                `free it or change the server's oauth.callbackPort`,
            )
            : error,
        ));
      server.listen(port, "127.0.0.1", () => resolve());
    });
    const instance = ref.instance = new CallbackServer(server, (server.address() as { port: number }).port);
    instance.#onRefused = onRefused;
    return instance;
  }

  /** Sets the state a callback must carry; from now on a valid callback is kept until `wait()` takes it. */
  expect(state: string): void {
    this.#expected = state;
    let resolve!: (c: Callback) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<Callback>((res, rej) => [resolve, reject] = [res, rej]);
    promise.catch(() => {}); // settled before anyone waits: wait() still sees it
    this.#answer = { promise, resolve, reject };
  }

  /** The valid callback (it may have arrived already), or a rejection after `timeoutMs` or on `signal`. */
  async wait(timeoutMs: number, signal?: AbortSignal): Promise<Callback> {
    if (!this.#answer) throw new Error("No login is in progress: expect() was not called");
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const limits = new Promise<never>((_, reject) => {
      const seconds = Math.round(timeoutMs / 1000);
      timer = setTimeout(
        () => reject(new Error(`No answer from the browser within ${seconds} s; run the login again`)),
        timeoutMs,
      );
      onAbort = () => reject(new Error("The login was cancelled"));
      if (signal?.aborted) onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([this.#answer.promise, limits]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Stops listening. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.method !== "GET" || url.pathname !== CALLBACK_PATH) return page(res, 404, "Not found.");
    const params = url.searchParams;
    if (!this.#expected || params.get("state") !== this.#expected) {
      this.#onRefused?.("a redirect arrived with a state that is not this login's; it was refused");
      return page(
        res,
        400,
        "This sign-in response does not belong to the login in progress and was refused.",
      );
    }
    const waiter = this.#answer;
    if (!waiter) return page(res, 409, "This login has already finished.");
    this.#expected = undefined;
    const error = params.get("error");
    const code = params.get("code");
    if (error || !code) {
      // The server's description is not shown: an attacker can forge it (RFC 9207 mix-up advice).
      const what = error && /^[a-z_]{1,64}$/.test(error) ? `"${error}"` : "no code";
      page(res, 400, "The authorization server did not grant access. You can close this tab.");
      return waiter.reject(new Error(`The authorization server answered ${what} instead of a code`));
    }
    waiter.resolve({
      code,
      ...(params.get("iss") ? { iss: params.get("iss")! } : {}),
      finish: (ok, message) => page(res, ok ? 200 : 400, message),
    });
  }
}

function page(res: ServerResponse, status: number, message: string): void {
  const text = message.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  res.writeHead(status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  res.end(`<!doctype html><meta charset="utf-8"><title>codemode</title><p>${text}</p>`);
}
