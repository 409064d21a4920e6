/**
 * A fake runtime plugin for session-manager tests: each sandbox speaks the protocol (bootstrap -> ready,
 * execute -> done with the code echoed as the value, shutdown -> exit), and launching and becoming ready
 * can be slowed down or made to fail; and a session manager over it with small limits.
 * @module
 */
import type { RuntimePlugin, SandboxProcess } from "../../core/contracts/runtime.ts";
import { SessionManager, type SessionManagerOptions } from "../../core/sandbox/session_manager.ts";

/** A session manager over `runtime` (a fake one, usually), with small limits that `options` override. */
export function fakeSessions(
  runtime: RuntimePlugin | (() => Promise<RuntimePlugin>),
  options: Partial<SessionManagerOptions> = {},
): SessionManager {
  return new SessionManager({
    runtime: typeof runtime === "function" ? runtime : () => Promise.resolve(runtime),
    image: "none",
    limits: { memory: "64m", pids: 8 },
    command: ["python3", "-c", "pass"],
    bootstrap: () => ({
      type: "bootstrap",
      main: "",
      modules: {},
      packages: [],
      config: { max_output: 1024, servers: [] },
    }),
    rpc: () => Promise.resolve(null),
    maxOutput: 1024,
    idleTimeout: 300,
    graceSeconds: 0.2,
    ...options,
  });
}

/** What the fake's sandboxes did. */
export interface FakeTally {
  /** start() calls that returned a process. */
  launched: number;
  /** Processes that ended (shutdown, kill). */
  ended: number;
  /** Execute frames received. */
  runs: number;
}

/** How the fake behaves. */
export interface FakeOptions {
  name?: string;
  /** Milliseconds start() takes to hand over the process. */
  launchMs?: number;
  /** Milliseconds from the bootstrap frame to "ready". */
  readyMs?: number;
  /** Makes the n-th start() (1-based) reject. */
  failStart?: (n: number) => boolean;
}

const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How one fake sandbox process answers. */
export interface FakeProcessOptions {
  /** Milliseconds from the bootstrap frame to "ready". */
  readyMs?: number;
  /** The Python version "ready" names. */
  python?: string;
  /** Answers an execute frame (default: "done" with the code as the value). */
  onExecute?: (frame: { id: string; code: string; timeout: number }, send: (frame: unknown) => void) => void;
  /** Told when the process ends (shutdown or kill), once. */
  onEnd?: () => void;
}

/** A sandbox process that speaks the frame protocol from memory: ready, execute, shutdown. */
export function fakeSandboxProcess(options: FakeProcessOptions = {}): SandboxProcess {
  let out!: ReadableStreamDefaultController<Uint8Array>;
  let exit!: (code: number | null) => void;
  let ended = false;
  const exited = new Promise<number | null>((resolve) => (exit = resolve));
  const send = (frame: unknown) => !ended && out.enqueue(encoder.encode(JSON.stringify(frame) + "\n"));
  const end = (code: number | null) => {
    if (ended) return;
    ended = true;
    options.onEnd?.();
    out.close();
    exit(code);
  };
  const execute = options.onExecute ??
    ((frame, send) => send({ type: "done", id: frame.id, status: "ok", value: JSON.stringify(frame.code) }));
  let buffered = "";
  return {
    stdout: new ReadableStream({ start: (c) => void (out = c) }),
    stderr: new ReadableStream({ start: (c) => c.close() }),
    stdin: new WritableStream({
      write(chunk) {
        buffered += new TextDecoder().decode(chunk);
        for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
          const frame = JSON.parse(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
          if (frame.type === "bootstrap") {
            void sleep(options.readyMs ?? 0).then(() =>
              send({ type: "ready", python: options.python ?? "3.11" })
            );
          }
          if (frame.type === "shutdown") end(0);
          if (frame.type === "execute") execute(frame, send);
        }
      },
    }),
    kill: () => Promise.resolve(end(null)),
    exited,
  };
}

/** A fake runtime and its tally. */
export function fakeRuntime(options: FakeOptions = {}): RuntimePlugin & { tally: FakeTally } {
  const tally: FakeTally = { launched: 0, ended: 0, runs: 0 };
  let starts = 0;
  const process = (): SandboxProcess =>
    fakeSandboxProcess({
      readyMs: options.readyMs,
      onEnd: () => tally.ended++,
      onExecute: (frame, send) => {
        tally.runs++;
        send({ type: "done", id: frame.id, status: "ok", value: JSON.stringify(frame.code) });
      },
    });
  const name = options.name ?? "fake";
  return {
    name,
    tally,
    detect: () => Promise.resolve({ name, available: true, problems: [] }),
    async start() {
      const n = ++starts;
      await sleep(options.launchMs ?? 0);
      if (options.failStart?.(n)) throw new Error(`fake start ${n} failed`);
      tally.launched++;
      return process();
    },
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
  };
}
