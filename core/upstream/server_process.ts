/**
 * A stdio server's process as the stdio transport drives it, on the runtime codemode runs on. Deno
 * spawns through `node:child_process`; Bun (the compiled binary) through `Bun.spawn`, because Bun's
 * `child_process` pipes add about 0.1 ms to every round trip (a request and its reply) on their own,
 * which is most of a proxied call's budget (BENCHMARKS.md, "hotpath"). Either way the server leads a
 * process group of its own, so the whole tree can be signalled.
 * @module
 */
import { spawn } from "node:child_process";
import process from "node:process";

/** How the server process ended. */
export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

/** What starts the server and where its output goes. */
export interface SpawnOptions {
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  onStdout: (chunk: Uint8Array) => void;
  onStderr: (chunk: Uint8Array) => void;
  /** A failure of the running process's pipes (not of its start). */
  onError: (error: Error) => void;
}

/** A running (or failed) server process. */
export interface ServerProcess {
  /** Its process id, once it runs. */
  readonly pid: number | undefined;
  /** Resolves with undefined once it runs, or with why it could not start (no process to wait for). */
  readonly spawned: Promise<Error | undefined>;
  /** Resolves when it has ended (at once when it never started). */
  readonly exited: Promise<ExitInfo>;
  /** Resolves when its stdout is closed: everything it wrote has been handed to `onStdout`. */
  readonly stdoutClosed: Promise<void>;
  /** Writes to its stdin; resolves once the pipe took the text (waiting while the pipe is full). */
  write(text: string): Promise<void>;
  /** Closes its stdin (EOF), the polite way to ask it to stop. */
  endInput(): void;
  /** Stops reading its stdout and stderr. */
  stopReading(): void;
  /** Holds back its stdout (the transport is working through a backlog); `resume` reads on. */
  pause(): void;
  resume(): void;
}

/** Starts a server with the runtime's fastest pipes. */
export function spawnServer(options: SpawnOptions): ServerProcess {
  const bun = (globalThis as { Bun?: BunRuntime }).Bun;
  return bun ? bunServer(bun, options) : nodeServer(options);
}

/** Signals a server's whole process group, falling back to the process alone; gone processes are fine. */
export function signalTree(pid: number, signal: "SIGTERM" | "SIGKILL"): void {
  if (process.platform === "win32") {
    spawn("taskkill", ["/pid", String(pid), "/T", "/F"], { stdio: "ignore", windowsHide: true })
      .on("error", () => {});
    return;
  }
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch { /* already gone */ }
  }
}

function nodeServer(options: SpawnOptions): ServerProcess {
  const child = spawn(options.command, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["pipe", "pipe", "pipe"],
    // Its own process group, so signals reach grandchildren (npx -> node, sh -c -> server).
    detached: process.platform !== "win32",
    windowsHide: true,
  });
  const stdoutClosed = new Promise<void>((resolve) => child.stdout!.on("close", resolve));
  child.stdout!.on("data", options.onStdout);
  child.stdout!.on("error", options.onError);
  child.stderr!.on("data", options.onStderr);
  child.stderr!.on("error", () => {});
  // EPIPE after the server died; its exit says more.
  child.stdin!.on("error", () => {});
  let running = false;
  let ended!: (exit: ExitInfo) => void;
  const exited = new Promise<ExitInfo>((resolve) => (ended = resolve));
  child.once("exit", (code, signal) => ended({ code, signal }));
  const spawned = new Promise<Error | undefined>((resolve) => {
    child.once("spawn", () => {
      running = true;
      resolve(undefined);
    });
    child.on("error", (error) => {
      if (running) return options.onError(error);
      // Never started (ENOENT, EACCES, bad cwd): there is no process to wait for.
      ended({ code: null, signal: null });
      resolve(error);
    });
  });
  return {
    get pid() {
      return child.pid;
    },
    spawned,
    exited,
    stdoutClosed,
    write(text) {
      const stdin = child.stdin!;
      if (stdin.destroyed) return Promise.reject(new Error("The server process is not running"));
      if (stdin.write(text)) return Promise.resolve();
      return new Promise((resolve) => stdin.once("drain", resolve));
    },
    endInput: () => void child.stdin?.end(),
    stopReading() {
      child.stdout?.destroy();
      child.stderr?.destroy();
    },
    pause: () => void child.stdout?.pause(),
    resume() {
      if (child.stdout?.isPaused()) child.stdout.resume();
    },
  };
}

/** The part of Bun's API used here (Deno type-checks this file too). */
interface BunRuntime {
  spawn(options: {
    cmd: string[];
    cwd?: string;
    env: Record<string, string>;
    stdin: "pipe";
    stdout: "pipe";
    stderr: "pipe";
    detached: boolean;
  }): BunSubprocess;
}

interface BunSubprocess {
  pid: number;
  stdin: { write(chunk: string): number; flush(): number | Promise<number>; end(): unknown };
  stdout: ReadableStream<Uint8Array>;
  stderr: ReadableStream<Uint8Array>;
  exited: Promise<number>;
  exitCode: number | null;
  signalCode: string | null;
}

function bunServer(bun: BunRuntime, options: SpawnOptions): ServerProcess {
  let child: BunSubprocess;
  try {
    child = bun.spawn({
      cmd: [options.command, ...options.args],
      cwd: options.cwd,
      env: options.env,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: process.platform !== "win32",
    });
  } catch (error) {
    // Bun reports a command it cannot start (ENOENT, EACCES, bad cwd) by throwing.
    const failure = error instanceof Error ? error : new Error(String(error));
    return {
      pid: undefined,
      spawned: Promise.resolve(failure),
      exited: Promise.resolve({ code: null, signal: null }),
      stdoutClosed: Promise.resolve(),
      write: () => Promise.reject(new Error("The server process is not running")),
      endInput: () => {},
      stopReading: () => {},
      pause: () => {},
      resume: () => {},
    };
  }
  const readers: ReadableStreamDefaultReader<Uint8Array>[] = [];
  // While paused, stdout is not read: the pipe fills and the server waits, as with a paused Node stream.
  let paused: { promise: Promise<void>; resolve: () => void } | undefined;
  const pump = async (
    stream: ReadableStream<Uint8Array>,
    onChunk: (chunk: Uint8Array) => void,
    report: boolean,
  ) => {
    const reader = stream.getReader();
    readers.push(reader);
    try {
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        onChunk(read.value);
        if (report && paused) await paused.promise;
      }
    } catch (error) {
      if (report) options.onError(error instanceof Error ? error : new Error(String(error)));
    }
  };
  const stdoutClosed = pump(child.stdout, options.onStdout, true);
  void pump(child.stderr, options.onStderr, false);
  let closedInput = false;
  return {
    pid: child.pid,
    spawned: Promise.resolve(undefined),
    exited: child.exited.then(() => ({ code: child.exitCode, signal: child.signalCode })),
    stdoutClosed,
    write(text) {
      if (closedInput) return Promise.reject(new Error("The server process is not running"));
      try {
        child.stdin.write(text);
        const flushed = child.stdin.flush();
        return flushed instanceof Promise ? flushed.then(() => {}) : Promise.resolve();
      } catch (error) {
        return Promise.reject(error);
      }
    },
    endInput() {
      closedInput = true;
      try {
        child.stdin.end();
      } catch { /* already closed */ }
    },
    stopReading() {
      for (const reader of readers) reader.cancel().catch(() => {});
      paused?.resolve();
    },
    pause() {
      if (paused) return;
      let resolve!: () => void;
      const promise = new Promise<void>((done) => (resolve = done));
      paused = { promise, resolve };
    },
    resume() {
      const held = paused;
      paused = undefined;
      held?.resolve();
    },
  };
}
