/**
 * MCP client transport for one stdio server, written for a long-lived pool rather than a single client:
 * the server runs in its own process group so the whole tree can be killed; stdout lines that are not
 * JSON-RPC are skipped; a reply over the size cap becomes an error for that one request instead of a
 * dead connection; stderr is read continuously (a full pipe would stall the server) and handed over in
 * capped lines; and the exit code is kept so a failed call can say how the server ended.
 * @module
 */
import { Buffer } from "node:buffer";
import process from "node:process";
import type { JSONRPCMessage, Transport } from "@modelcontextprotocol/client";
import { parseJSONRPCMessage } from "@modelcontextprotocol/client";
import { MESSAGE_TOO_LARGE } from "./errors.ts";
import type { ReplyRouter } from "./lean_calls.ts";
import { type ExitInfo, type ServerProcess, signalTree, spawnServer } from "./server_process.ts";

export type { ExitInfo } from "./server_process.ts";

/** Default cap on one message from the server, in bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Time spent handling a server's messages before yielding to the event loop, in milliseconds. */
const SLICE_MS = 5;
/** Longest stderr or noise line handed to the callbacks; the rest of a longer line is dropped. */
export const MAX_LINE_CHARS = 4096;

/** What starts the server and where its side channels go. */
export interface StdioTransportOptions {
  command: string;
  args?: string[];
  cwd?: string;
  /** The complete environment (callers build it with `serverEnv`). */
  env: Record<string, string>;
  /** Largest message accepted on stdout, in bytes. */
  maxMessageBytes?: number;
  /** Receives stderr one line at a time, each cut to `MAX_LINE_CHARS`. */
  onStderrLine?: (line: string) => void;
  /** Receives stdout lines that are not JSON-RPC messages, each cut to `MAX_LINE_CHARS`. */
  onNoise?: (line: string) => void;
}

/** Pids of the server process groups this process started and that still run. */
const live = new Set<number>();
let exitHookInstalled = false;

/** A stdio MCP transport that owns its server's process tree. */
export class UpstreamStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  /** Takes the responses to requests sent past the SDK client (lean_calls.ts) before it sees them. */
  router?: ReplyRouter;

  #options: StdioTransportOptions;
  #maxBytes: number;
  #child?: ServerProcess;
  #exit?: ExitInfo;
  #exited?: Promise<void>;
  /** Whether the process came up: true on "spawn", false on a spawn error. */
  #spawned?: Promise<boolean>;
  #closed = false;
  #chunks: Buffer[] = [];
  #pending = 0;
  /** Stdout not handled yet, and whether a slice of it is waiting for its turn. */
  #backlog: Buffer[] = [];
  #draining = false;
  /** Set while skipping the rest of an oversized line: its first and latest bytes, for the request id. */
  #oversized?: { head: string; tail: string; bytes: number };
  #stderrPartial = "";

  constructor(options: StdioTransportOptions) {
    this.#options = options;
    this.#maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** The server's process id, once started. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** How the server ended, once it has. */
  get exit(): ExitInfo | undefined {
    return this.#exit;
  }

  /** Spawns the server; rejects when the command cannot be started. */
  async start(): Promise<void> {
    if (this.#child) throw new Error("UpstreamStdioTransport already started");
    // close() may win the race against a start that is still on its way.
    if (this.#closed) throw new Error("The transport was closed before the server started");
    installExitHook();
    const { command, args = [], cwd, env } = this.#options;
    const child = this.#child = spawnServer({
      command,
      args,
      cwd,
      env,
      onStdout: (chunk) => this.#onStdout(chunk),
      onStderr: (chunk) => this.#onStderr(chunk),
      onError: (error) => this.onerror?.(error),
    });
    void child.exited.then(async (exit) => {
      // A command that never started has no exit to tell; its spawn error says what happened.
      if (await child.spawned) return;
      this.#exit = exit;
      const pid = child.pid;
      if (pid === undefined || !live.delete(pid)) return;
      // Whatever the server left behind in its group is orphaned now.
      signalTree(pid, "SIGKILL");
      // Let the last buffered reply through, but never wait on a pipe some stray process still holds.
      const grace = setTimeout(() => this.#finish(), 500);
      child.stdoutClosed.then(() => {
        clearTimeout(grace);
        this.#finish();
      });
    });
    const failed = await child.spawned;
    if (failed) {
      this.#finish();
      throw failed;
    }
    if (child.pid !== undefined && !this.#exit) live.add(child.pid);
  }

  /** Writes one message; waits for the pipe to drain when it is full. */
  send(message: JSONRPCMessage): Promise<void> {
    const child = this.#child;
    if (!child || this.#exit || this.#closed) {
      return Promise.reject(new Error("The server process is not running"));
    }
    return child.write(JSON.stringify(message) + "\n");
  }

  /** Stops the server the way the MCP spec suggests (EOF, SIGTERM, SIGKILL) and waits for it to exit. */
  async close(): Promise<void> {
    const child = this.#child;
    if (!child || (await child.spawned)) return this.#finish();
    if (!this.#exit) {
      child.endInput();
      const pid = child.pid!;
      const exited = child.exited.then(() => {});
      if (!(await settlesWithin(exited, 300))) {
        signalTree(pid, "SIGTERM");
        if (!(await settlesWithin(exited, 2000))) signalTree(pid, "SIGKILL");
      }
      await exited;
    }
    this.#finish();
  }

  #finish(): void {
    if (this.#closed) return;
    // What the server said before it went is still its answer.
    this.#drain(Infinity);
    this.#closed = true;
    this.#backlog = [];
    this.#chunks = [];
    this.#child?.stopReading();
    this.router?.closed();
    this.onclose?.();
  }

  #onStdout(bytes: Uint8Array): void {
    this.#backlog.push(asBuffer(bytes));
    if (!this.#draining) this.#drain();
  }

  /**
   * Handles the backlog's messages for about SLICE_MS, then pauses the pipe and yields to the event loop:
   * a server that sends thousands of messages at once (notifications, say) gets them handled in slices
   * instead of holding up every other session.
   */
  #drain(budgetMs = SLICE_MS): void {
    const started = performance.now();
    while (this.#backlog.length) {
      const chunk = this.#backlog[0];
      const used = this.#consume(chunk, started, budgetMs);
      if (used < chunk.length) {
        this.#backlog[0] = chunk.subarray(used);
        this.#draining = true;
        this.#child?.pause();
        setImmediate(() => {
          this.#draining = false;
          this.#drain();
        });
        return;
      }
      this.#backlog.shift();
    }
    this.#child?.resume();
  }

  /** Handles the lines of `chunk` until `budgetMs` since `started` are spent; returns the bytes used. */
  #consume(chunk: Buffer, started: number, budgetMs: number): number {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(10, start);
      const end = newline === -1 ? chunk.length : newline;
      const piece = chunk.subarray(start, end);
      if (this.#oversized) {
        this.#oversized.bytes += piece.length;
        this.#oversized.tail = (this.#oversized.tail + piece.subarray(-512).toString("latin1")).slice(-512);
      } else if (this.#pending + piece.length > this.#maxBytes) {
        const head = Buffer.concat([...this.#chunks, piece.subarray(0, 512)]).subarray(0, 512);
        this.#oversized = {
          head: head.toString("latin1"),
          tail: piece.subarray(-512).toString("latin1"),
          bytes: this.#pending + piece.length,
        };
        this.#chunks = [];
        this.#pending = 0;
      } else if (piece.length) {
        this.#chunks.push(piece);
        this.#pending += piece.length;
      }
      if (newline === -1) return chunk.length;
      start = newline + 1;
      if (this.#oversized) this.#dropOversized(this.#oversized);
      else this.#line(Buffer.concat(this.#chunks, this.#pending).toString("utf8"));
      this.#oversized = undefined;
      this.#chunks = [];
      this.#pending = 0;
      if (performance.now() - started > budgetMs) return start;
    }
    return start;
  }

  #line(line: string): void {
    const text = line.trim();
    if (!text) return;
    let message: JSONRPCMessage;
    try {
      const value = JSON.parse(text);
      // A response the router claims skips the envelope's schema parse: the router checks what it uses.
      if (this.router && isResponse(value) && this.router.take(value, text)) return;
      message = parseJSONRPCMessage(value);
    } catch {
      this.#options.onNoise?.(text.slice(0, MAX_LINE_CHARS));
      return;
    }
    this.onmessage?.(message);
  }

  /** Answers the request an oversized reply belonged to with an error, so only that call fails. */
  #dropOversized({ head, tail, bytes }: { head: string; tail: string; bytes: number }): void {
    const id = replyId(head, tail);
    const detail = `a message of ${mib(bytes)} MiB, over the ${mib(this.#maxBytes)} MiB limit`;
    if (id === undefined) {
      // No way to tell whose reply it was; failing everything beats leaving a call to hang.
      this.onerror?.(new Error(`The server sent ${detail}; closing the connection`));
      void this.close();
      return;
    }
    const reply = {
      jsonrpc: "2.0" as const,
      id,
      error: { code: MESSAGE_TOO_LARGE, message: `The server replied with ${detail}`, data: { bytes } },
    };
    if (!this.router?.take(reply, JSON.stringify(reply))) this.onmessage?.(reply);
  }

  #onStderr(bytes: Uint8Array): void {
    const lines = (this.#stderrPartial + asBuffer(bytes).toString("utf8")).split("\n");
    this.#stderrPartial = lines.pop()!.slice(0, MAX_LINE_CHARS);
    for (const line of lines) this.#options.onStderrLine?.(line.slice(0, MAX_LINE_CHARS));
  }
}

/** Whether a parsed line is shaped like a JSON-RPC response (an object with an id and no method). */
function isResponse(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && "id" in value && !("method" in value);
}

/** Finds the id of a JSON-RPC response from the start and end of its text; undefined if unsure. */
export function replyId(head: string, tail: string): string | number | undefined {
  const value = String.raw`(-?\d+|"(?:[^"\\]|\\.)*")`;
  // {"jsonrpc":"2.0","id":7,"result":...} (most SDKs) or {"result":...,"jsonrpc":"2.0","id":7} (TypeScript SDK)
  const leading = new RegExp(
    String.raw`^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*${value}\s*,\s*"(?:result|error)"`,
  )
    .exec(head);
  const trailing = /^\s*\{\s*"(?:result|error)"\s*:/.test(head)
    ? new RegExp(String.raw`"id"\s*:\s*${value}\s*\}\s*$`).exec(tail)
    : null;
  const found = (leading ?? trailing)?.[1];
  if (found === undefined) return undefined;
  try {
    return JSON.parse(found);
  } catch {
    return undefined;
  }
}

/** A Buffer over the same bytes (Bun's pipes hand over plain Uint8Arrays). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1).replace(/\.0$/, "");
}

function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    promise.then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** If this process exits without closing the pool, take the servers down with it instead of orphaning them. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const pid of live) signalTree(pid, "SIGKILL");
  });
}
