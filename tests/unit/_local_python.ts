/**
 * Test helper: runs the sandbox runtime with the host's own python3 (no container) and speaks frames
 * to it, so unit tests can check the Python logic. Not a sandbox: nothing here is isolated.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { type BootstrapConfig, type HostFrame, SandboxFrame } from "../../core/sandbox/protocol.ts";
import { bootstrapCommand, bootstrapFrame } from "../../sandbox/source.ts";

/** A frame the runtime sent, validated by the host's own schema. */
export type Frame = SandboxFrame;
/** An rpc frame from the runtime. */
export type RpcFrame = Extract<Frame, { type: "rpc" }>;
/** A done frame from the runtime. */
export type DoneFrame = Extract<Frame, { type: "done" }>;
/** A display frame from the runtime. */
export type DisplayFrame = Extract<Frame, { type: "display" }>;
/** A frame about a background job (its start and end, or its output). */
export type JobFrame = Extract<Frame, { type: "job" | "job_output" }>;
/** What a test host answers to an rpc: a value, or an error. */
export type RpcAnswer = { value: unknown } | { error: { type: string; message: string } };

/** Everything one execute produced. */
export interface Execution {
  done: DoneFrame;
  stdout: string;
  stderr: string;
  outputs: Extract<Frame, { type: "output" }>[];
  rpcs: RpcFrame[];
  displays: DisplayFrame[];
  /** Output and display frames in the order they came. */
  frames: Frame[];
  /** Artifact pieces and skip notices, in order. */
  artifacts: Extract<Frame, { type: "artifact" | "artifact_skipped" }>[];
}

/**
 * Default config: one server whose name needs aliasing. The pre-run check is off, so the frames a test
 * sees are its program's own (tests/unit/precheck_test.ts turns it on).
 */
export const TEST_CONFIG: BootstrapConfig = {
  max_output: 1024 * 1024,
  servers: [{ name: "my-server", alias: "my_server", description: "A test server" }],
  precheck: "off",
};

/** A python3 process running the runtime, fed frames over stdin and read frame by frame. */
export class LocalPython {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  #frames: Frame[] = [];
  #waiters: (() => void)[] = [];
  #buffer = "";
  #ended = false;
  #ids = 0;
  /** Frames about background jobs, in the order they came (they never show up in `next()`). */
  readonly jobFrames: JobFrame[] = [];
  /** Answers calls background jobs make (rpc frames with `job`) as they come; unset, they queue in next(). */
  background?: (rpc: RpcFrame) => RpcAnswer | Promise<RpcAnswer>;

  private constructor(child: ChildProcess) {
    this.child = child;
    this.exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => this.#onData(chunk));
    child.stdout!.on("end", () => {
      this.#ended = true;
      this.#wake();
    });
    child.stderr!.on("data", (chunk: Buffer) => Deno.stderr.writeSync(chunk));
  }

  /** Spawns python3 with the bootstrap command and sends the bootstrap frame (plus `extra` text). */
  static start(config: BootstrapConfig = TEST_CONFIG, extra = ""): LocalPython {
    const [command, ...args] = bootstrapCommand("python3");
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    const python = new LocalPython(child);
    child.stdin!.write(JSON.stringify(bootstrapFrame(config)) + "\n" + extra);
    return python;
  }

  /** Starts a runtime and waits for its ready frame. */
  static async ready(config: BootstrapConfig = TEST_CONFIG): Promise<LocalPython> {
    const python = LocalPython.start(config);
    const frame = await python.next();
    if (frame.type !== "ready") throw new Error(`Expected a ready frame, got ${JSON.stringify(frame)}`);
    return python;
  }

  /** Writes one frame to the runtime's stdin. */
  send(frame: HostFrame): void {
    this.child.stdin!.write(JSON.stringify(frame) + "\n");
  }

  /** The next frame, waiting up to `ms`; throws at EOF or timeout. */
  async next(ms = 20_000): Promise<Frame> {
    const deadline = Date.now() + ms;
    while (this.#frames.length === 0) {
      if (this.#ended) throw new Error("The runtime closed stdout");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`No frame within ${ms} ms`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
    }
    return this.#frames.shift()!;
  }

  /** Runs code to its done frame, answering rpcs with `answer` (a missing answer is an error). */
  async execute(
    code: string,
    options: { timeout?: number; answer?: (rpc: RpcFrame) => RpcAnswer | Promise<RpcAnswer> } = {},
  ): Promise<Execution> {
    const id = `e${++this.#ids}`;
    this.send({ type: "execute", id, code, timeout: options.timeout ?? 10 });
    const result: Omit<Execution, "done"> = {
      stdout: "",
      stderr: "",
      outputs: [],
      rpcs: [],
      displays: [],
      frames: [],
      artifacts: [],
    };
    while (true) {
      const frame = await this.next();
      if (frame.type === "output") {
        result.outputs.push(frame);
        result.frames.push(frame);
        result[frame.stream] += frame.data;
      } else if (frame.type === "display") {
        result.displays.push(frame);
        result.frames.push(frame);
      } else if (frame.type === "rpc") {
        result.rpcs.push(frame);
        const answer = options.answer
          ? await options.answer(frame)
          : { error: { type: "RuntimeError", message: `No answer for ${frame.method}` } };
        this.answer(frame, answer);
      } else if (frame.type === "artifact" || frame.type === "artifact_skipped") {
        result.artifacts.push(frame);
      } else if (frame.type === "done") {
        if (frame.id !== id) throw new Error(`Done frame for ${frame.id}, expected ${id}`);
        return { done: frame, ...result };
      } else {
        throw new Error(`Unexpected frame ${JSON.stringify(frame)}`);
      }
    }
  }

  /** Sends the rpc_result for an rpc frame. */
  answer(rpc: RpcFrame, answer: RpcAnswer): void {
    if ("error" in answer) this.send({ type: "rpc_result", id: rpc.id, ok: false, error: answer.error });
    else this.send({ type: "rpc_result", id: rpc.id, ok: true, value: answer.value });
  }

  /** Asks the runtime to exit and waits; kills it if it does not go within `ms`. */
  async close(ms = 5_000): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.send({ type: "shutdown" });
      const timer = setTimeout(() => this.child.kill("SIGKILL"), ms);
      await this.exited;
      clearTimeout(timer);
    }
    this.child.stdin!.destroy();
    return this.child.exitCode;
  }

  #onData(chunk: string): void {
    this.#buffer += chunk;
    let newline;
    while ((newline = this.#buffer.indexOf("\n")) >= 0) {
      const line = this.#buffer.slice(0, newline);
      this.#buffer = this.#buffer.slice(newline + 1);
      const frame = SandboxFrame.parse(JSON.parse(line));
      if (frame.type === "job" || frame.type === "job_output") this.jobFrames.push(frame);
      else if (frame.type === "rpc" && frame.job && this.background) {
        const answer = this.background;
        void Promise.resolve(answer(frame)).then((value) => this.answer(frame, value));
      } else this.#frames.push(frame);
    }
    this.#wake();
  }

  /** Waits until a job frame matching `match` has come (up to `ms`). */
  async jobFrame(match: (frame: JobFrame) => boolean, ms = 20_000): Promise<JobFrame> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = this.jobFrames.find(match);
      if (found) return found;
      if (this.#ended) throw new Error("The runtime closed stdout");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`No matching job frame within ${ms} ms`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, Math.min(left, 100));
      });
    }
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

/** Runs `fn` with a ready runtime and always shuts it down. */
export async function withPython(
  fn: (python: LocalPython) => Promise<void>,
  config: BootstrapConfig = TEST_CONFIG,
): Promise<void> {
  const python = await LocalPython.ready(config);
  try {
    await fn(python);
  } finally {
    await python.close();
  }
}
