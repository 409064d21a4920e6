/**
 * A fake runtime plugin for session-manager tests: each sandbox speaks the protocol (bootstrap -> ready,
 * execute -> done with the code echoed as the value, shutdown -> exit), and launching and becoming ready
 * can be slowed down or made to fail.
 * @module
 */
import type { RuntimePlugin, SandboxProcess } from "../../core/contracts/runtime.ts";

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

/** A fake runtime and its tally. */
export function fakeRuntime(options: FakeOptions = {}): RuntimePlugin & { tally: FakeTally } {
  const tally: FakeTally = { launched: 0, ended: 0, runs: 0 };
  let starts = 0;
  const process = (): SandboxProcess => {
    let out!: ReadableStreamDefaultController<Uint8Array>;
    let exit!: (code: number | null) => void;
    let ended = false;
    const exited = new Promise<number | null>((resolve) => (exit = resolve));
    const send = (frame: unknown) => !ended && out.enqueue(encoder.encode(JSON.stringify(frame) + "\n"));
    const end = (code: number | null) => {
      if (ended) return;
      ended = true;
      tally.ended++;
      out.close();
      exit(code);
    };
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
              void sleep(options.readyMs ?? 0).then(() => send({ type: "ready", python: "3.11" }));
            }
            if (frame.type === "shutdown") end(0);
            if (frame.type === "execute") {
              tally.runs++;
              send({ type: "done", id: frame.id, status: "ok", value: JSON.stringify(frame.code) });
            }
          }
        },
      }),
      kill: () => Promise.resolve(end(null)),
      exited,
    };
  };
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
