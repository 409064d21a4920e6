/**
 * `tools/call` on a stdio server without the SDK client's request machinery: the hot path of every
 * proxied call. The SDK client spends most of its CPU per call on work codemode does not need (a zod
 * parse of each message's envelope, era codec probes, an async schema pass, bookkeeping for progress
 * and resumption), about three times what the rest of the host spends; this sends the request on the
 * same transport and takes its response back before the client sees it.
 *
 * What stays the same as `Client.callTool`: the result is checked with the SDK's own `CallToolResult`
 * schema (the tool's `outputSchema` is checked by the connection for both paths, off the event loop:
 * result_validation.ts); a JSON-RPC error becomes the SDK's `ProtocolError`; a timeout or an abort sends
 * `notifications/cancelled` and rejects with the SDK's `RequestTimeout` error; a closed connection
 * rejects every open call with its `ConnectionClosed` error. So upstream/errors.ts explains a failure
 * the same way whichever path the call took. What is added: the response's JSON text, verbatim, so the
 * host can hand the result to the sandbox without decoding and encoding it again.
 *
 * Requests carry string ids with a prefix of their own, so they can never be confused with the SDK
 * client's numeric ids on the same connection.
 * @module
 */
import {
  type CallToolResult,
  type JSONRPCMessage,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  specTypeSchemas,
} from "@modelcontextprotocol/client";
import type { TraceContext } from "../observe/trace.ts";

/** A tool's result as the server sent it: checked, plus the response's JSON text when it is known. */
export interface ToolReply {
  result: CallToolResult;
  /** The server's whole JSON-RPC response, one line of JSON whose `result` member is `result`. */
  json?: string;
}

/** How the transport hands over responses that were not meant for the SDK client. */
export interface ReplyRouter {
  /** Takes a response to one of this router's requests (false: not ours, the SDK client gets it). */
  take(message: Record<string, unknown>, json: string): boolean;
  /** The connection ended: every open request fails. */
  closed(): void;
}

/** Options of one call. */
export interface LeanCallOptions {
  timeout: number;
  signal?: AbortSignal;
  /** The trace context of the host's span for this call, sent as the request's `_meta`. */
  meta?: TraceContext;
}

interface Pending {
  resolve: (reply: ToolReply) => void;
  reject: (error: unknown) => void;
  /** `performance.now()` after which the call times out, and its timeout. */
  deadline: number;
  timeout: number;
  signal?: AbortSignal;
}

const ID_PREFIX = "codemode-";
const CallToolResultSchema = specTypeSchemas.CallToolResult;

/** The open `tools/call` requests of one stdio connection. */
export class LeanToolCalls implements ReplyRouter {
  #send: (message: JSONRPCMessage) => Promise<void>;
  #pending = new Map<string, Pending>();
  #ids = 0;
  #closed = false;
  /**
   * One timer for every open call, set for the earliest deadline and re-armed when it fires: calls
   * come and go hundreds of times a second, and a timer each would cost more than the rest of a call.
   */
  #timer?: ReturnType<typeof setTimeout>;
  #timerAt = Infinity;
  /** Open calls by the signal that cancels them; each signal gets one listener, not one per call. */
  #bySignal = new WeakMap<AbortSignal, Set<string>>();

  /** `send` writes a message on the connection's transport. */
  constructor(send: (message: JSONRPCMessage) => Promise<void>) {
    this.#send = send;
  }

  /** How many calls wait for their response. */
  get open(): number {
    return this.#pending.size;
  }

  /** Calls `tool` with `args`. The request's params are built here and only here. */
  call(tool: string, args: Record<string, unknown>, options: LeanCallOptions): Promise<ToolReply> {
    if (this.#closed) return Promise.reject(new SdkError(SdkErrorCode.ConnectionClosed, "Connection closed"));
    const { signal, timeout } = options;
    if (signal?.aborted) return Promise.reject(asSdkError(signal.reason));
    const id = `${ID_PREFIX}${++this.#ids}`;
    return new Promise<ToolReply>((resolve, reject) => {
      const deadline = performance.now() + timeout;
      this.#pending.set(id, { resolve, reject, deadline, timeout, signal });
      if (deadline < this.#timerAt) this.#arm(deadline);
      if (signal) this.#watch(signal, id);
      const params = options.meta
        ? { name: tool, arguments: args, _meta: { ...options.meta } }
        : { name: tool, arguments: args };
      this.#send({ jsonrpc: "2.0", id, method: "tools/call", params }).catch((error) => {
        if (this.#forget(id)) reject(error);
      });
    });
  }

  take(message: Record<string, unknown>, json: string): boolean {
    const id = message.id;
    if (typeof id !== "string" || !id.startsWith(ID_PREFIX)) return false;
    const pending = this.#forget(id);
    // A late answer to a call that timed out or was cancelled: nobody waits for it any more.
    if (!pending) return true;
    // What the SDK client's envelope parse would drop fails its call at once instead of at its timeout.
    if (message.jsonrpc !== "2.0" || ("result" in message) === ("error" in message)) {
      pending.reject(new SdkError(SdkErrorCode.InvalidResult, "Invalid JSON-RPC response to tools/call"));
      return true;
    }
    if (message.error !== undefined) {
      pending.reject(protocolError(message.error));
      return true;
    }
    const checked = CallToolResultSchema["~standard"].validate(message.result);
    if (checked.issues) {
      pending.reject(
        new SdkError(
          SdkErrorCode.InvalidResult,
          `Invalid result for tools/call: ${describeIssues(checked.issues)}`,
        ),
      );
      return true;
    }
    pending.resolve({ result: checked.value as CallToolResult, json });
    return true;
  }

  closed(): void {
    this.#closed = true;
    const error = new SdkError(SdkErrorCode.ConnectionClosed, "Connection closed");
    for (const id of [...this.#pending.keys()]) this.#forget(id)?.reject(error);
  }

  /** Stops waiting for `id`; returns what was waiting, if anything was. */
  #forget(id: string): Pending | undefined {
    const pending = this.#pending.get(id);
    if (!pending) return undefined;
    this.#pending.delete(id);
    if (pending.signal) this.#bySignal.get(pending.signal)?.delete(id);
    if (!this.#pending.size && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerAt = Infinity;
    }
    return pending;
  }

  /** Sets the one timer for `at` (a `performance.now()` time). */
  #arm(at: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, at - performance.now()));
  }

  /** Times out every call past its deadline, then sets the timer for the earliest one left. */
  #expire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const [id, pending] of [...this.#pending]) {
      if (pending.deadline <= now) {
        const timeout = pending.timeout;
        this.#cancel(id, new SdkError(SdkErrorCode.RequestTimeout, "Request timed out", { timeout }));
      } else if (pending.deadline < next) next = pending.deadline;
    }
    if (next < Infinity && this.#pending.size) this.#arm(next);
  }

  /** Cancels the call `id` when `signal` aborts: one listener per signal, for all its calls. */
  #watch(signal: AbortSignal, id: string): void {
    let ids = this.#bySignal.get(signal);
    if (!ids) {
      const watched = ids = new Set();
      this.#bySignal.set(signal, ids);
      signal.addEventListener("abort", () => {
        for (const open of [...watched]) this.#cancel(open, signal.reason);
      }, { once: true });
    }
    ids.add(id);
  }

  /** Gives up on `id` and tells the server, as the SDK client does on a timeout or an abort. */
  #cancel(id: string, reason: unknown): void {
    const pending = this.#forget(id);
    if (!pending) return;
    const params = { requestId: id, reason: String(reason) };
    this.#send({ jsonrpc: "2.0", method: "notifications/cancelled", params }).catch(() => {});
    pending.reject(asSdkError(reason));
  }
}

/** Schema issues as one line, as the SDK client words them: `path: message`, comma-separated. */
function describeIssues(issues: ReadonlyArray<{ message: string; path?: ReadonlyArray<unknown> }>): string {
  return issues.map((issue) => {
    const path = (issue.path ?? []).map((key) =>
      typeof key === "object" ? (key as { key: unknown }).key : key
    );
    return path.length ? `${path.join(".")}: ${issue.message}` : issue.message;
  }).join(", ");
}

/** What the SDK client rejects a timed-out or aborted request with. */
function asSdkError(reason: unknown): SdkError {
  return reason instanceof SdkError ? reason : new SdkError(SdkErrorCode.RequestTimeout, String(reason));
}

/** A JSON-RPC error member as the SDK client turns it into an exception. */
function protocolError(error: unknown): Error {
  const e = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>;
  if (!Number.isInteger(e.code) || typeof e.message !== "string") {
    return new SdkError(SdkErrorCode.InvalidResult, "Invalid error response for tools/call");
  }
  return ProtocolError.fromError(e.code as number, e.message, e.data);
}
