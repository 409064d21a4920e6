/**
 * MCP client transport for one stdio server, written for a long-lived pool rather than a single client:
 * the server runs in its own process group so the whole tree can be killed; stdout lines that are not
 * JSON-RPC are skipped; a reply over the size cap becomes an error for that one request instead of a
 * dead connection; stderr is read continuously (a full pipe would stall the server) and handed over in
 * capped lines; and the exit code is kept so a failed call can say how the server ended.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import type { JSONRPCMessage, Transport } from "@modelcontextprotocol/client";
import { parseJSONRPCMessage } from "@modelcontextprotocol/client";
import { MESSAGE_TOO_LARGE } from "./errors.ts";

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

/** How the server process ended. */
export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kills a server's whole process tree (its group on POSIX), ignoring processes already gone. */
export function killTree(child: ChildProcess, signal: "SIGTERM" | "SIGKILL"): void {
  if (child.pid === undefined) return;
  if (process.platform === "win32") {
    if (child.exitCode !== null) return;
    spawn("taskkill", ["/pid", String(child.pid), "/T", "/F"], { stdio: "ignore", windowsHide: true })
      .on("error", () => child.kill());
    return;
  }
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch { /* already gone */ }
  }
}

/** A stdio MCP transport that owns its server's process tree. */
export class UpstreamStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  #options: StdioTransportOptions;
  #maxBytes: number;
  #child?: ChildProcess;
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
  start(): Promise<void> {
    if (this.#child) throw new Error("UpstreamStdioTransport already started");
    // close() may win the race against a start that is still on its way.
    if (this.#closed) return Promise.reject(new Error("The transport was closed before the server started"));
    installExitHook();
    const { command, args = [], cwd, env } = this.#options;
    const child = spawn(command, args, {
      cwd,
      env,
      stdio: ["pipe", "pipe", "pipe"],
      // Its own process group, so close() reaches grandchildren (npx -> node, sh -c -> server).
      detached: process.platform !== "win32",
      windowsHide: true,
    });
    this.#child = child;
    let stdoutDone!: () => void;
    const stdoutClosed = new Promise<void>((resolve) => (stdoutDone = resolve));
    child.stdout!.on("data", (chunk: Buffer) => this.#onStdout(chunk));
    child.stdout!.on("close", stdoutDone);
    child.stdout!.on("error", (error) => this.onerror?.(error));
    child.stderr!.on("data", (chunk: Buffer) => this.#onStderr(chunk));
    child.stderr!.on("error", () => {});
    // EPIPE after the server died; the exit handler reports that.
    child.stdin!.on("error", () => {});
    let exited!: () => void;
    this.#exited = new Promise<void>((resolve) => (exited = resolve));
    child.once("exit", (code, signal) => {
      this.#exit = { code, signal };
      live.delete(child);
      // Whatever the server left behind in its group is orphaned now.
      killTree(child, "SIGKILL");
      // Let the last buffered reply through, but never wait on a pipe some stray process still holds.
      const grace = setTimeout(() => this.#finish(), 500);
      stdoutClosed.then(() => {
        clearTimeout(grace);
        this.#finish();
      });
      exited();
    });
    let spawnError: Error | undefined;
    this.#spawned = new Promise<boolean>((resolve) => {
      child.once("spawn", () => {
        live.add(child);
        resolve(true);
      });
      child.on("error", (error) => {
        if (live.has(child)) return this.onerror?.(error);
        // Never started (ENOENT, EACCES, bad cwd): there is no process to wait for.
        spawnError = error;
        exited();
        resolve(false);
        this.#finish();
      });
    });
    return this.#spawned.then((ok) => {
      if (!ok) throw spawnError;
    });
  }

  /** Writes one message; waits for the pipe to drain when it is full. */
  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin || this.#exit || this.#closed || stdin.destroyed) {
      return Promise.reject(new Error("The server process is not running"));
    }
    return new Promise((resolve) => {
      if (stdin.write(JSON.stringify(message) + "\n")) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Stops the server the way the MCP spec suggests (EOF, SIGTERM, SIGKILL) and waits for it to exit. */
  async close(): Promise<void> {
    const child = this.#child;
    if (!child || !this.#exited || !(await this.#spawned)) return this.#finish();
    if (!this.#exit) {
      child.stdin?.end();
      if (!(await settlesWithin(this.#exited, 300))) {
        killTree(child, "SIGTERM");
        if (!(await settlesWithin(this.#exited, 2000))) killTree(child, "SIGKILL");
      }
      await this.#exited;
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
    this.#child?.stdout?.destroy();
    this.#child?.stderr?.destroy();
    this.onclose?.();
  }

  #onStdout(chunk: Buffer): void {
    this.#backlog.push(chunk);
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
        this.#child?.stdout?.pause();
        setImmediate(() => {
          this.#draining = false;
          this.#drain();
        });
        return;
      }
      this.#backlog.shift();
    }
    this.#child?.stdout?.resume();
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
      message = parseJSONRPCMessage(JSON.parse(text));
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
    this.onmessage?.({
      jsonrpc: "2.0",
      id,
      error: { code: MESSAGE_TOO_LARGE, message: `The server replied with ${detail}`, data: { bytes } },
    });
  }

  #onStderr(chunk: Buffer): void {
    const lines = (this.#stderrPartial + chunk.toString("utf8")).split("\n");
    this.#stderrPartial = lines.pop()!.slice(0, MAX_LINE_CHARS);
    for (const line of lines) this.#options.onStderrLine?.(line.slice(0, MAX_LINE_CHARS));
  }
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
    for (const child of live) killTree(child, "SIGKILL");
  });
}
