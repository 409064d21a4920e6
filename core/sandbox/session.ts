/**
 * One sandbox session: a persistent sandbox process, bootstrapped over stdin, that runs code in one
 * Python namespace across calls. Runs are serialised; calls the sandbox makes are served concurrently.
 * Everything the sandbox sends is untrusted: parsed, size-capped, and dropped when malformed.
 * @module
 */
import {
  type Isolation,
  isolationOf,
  type RuntimePlugin,
  type SandboxProcess,
  type SandboxStartOptions,
} from "../contracts/runtime.ts";
import type { RunResult } from "../contracts/output.ts";
import { DEFAULT_MAX_FRAME_BYTES, type HostFrame, SandboxFrame } from "./protocol.ts";
import { readFrames } from "./frame_reader.ts";
import { pythonErrorType, type RpcContext, RpcError, type RpcHandler } from "../host_api/rpc.ts";
import { RunClock } from "../host_api/run_clock.ts";
import { RunCalls } from "../host_api/run_calls.ts";
import type { Approver } from "../host_api/approvals.ts";
import { OutputBuffer } from "./output_buffer.ts";
import { type DoneFrame, type RunEnd, runResult } from "./run_result.ts";
import { DEFAULT_MAX_DISPLAY, DisplayCollector } from "./displays.ts";
import { currentLogScope, log, type LogScope, withLogScope } from "../observe/log.ts";
import { stats } from "../observe/stats.ts";
import { nestingDepth } from "../host_api/tool_result.ts";
import type { ArtifactStore } from "../artifacts/store.ts";
import { ArtifactReceiver, MAX_ARTIFACTS_PER_RUN, withArtifacts } from "./artifact_receiver.ts";
import { FileSender, type SandboxFile } from "./file_sender.ts";
import { SessionJobs } from "../host_api/jobs.ts";

/** How a session is started and run. */
export interface SandboxSessionOptions {
  runtime: RuntimePlugin;
  sandbox: SandboxStartOptions;
  bootstrap: HostFrame;
  rpc: RpcHandler;
  /** The client session the sandbox serves (calls into the host name it); default: the sandbox's name. */
  session?: string;
  /** Cap per stream per run, in bytes. */
  maxOutput: number;
  /** Cap on one run's displays, in bytes (default 8 MiB). */
  maxDisplay?: number;
  maxFrameBytes?: number;
  /** How long the sandbox may take to say it is ready. */
  startTimeoutMs?: number;
  /** How long after its timeout a run may take to stop before the sandbox is killed. */
  graceMs?: number;
  /** Most background jobs running at once (CODEMODE_MAX_JOBS; the sandbox is told the same). */
  maxJobs?: number;
  /** Seconds a background job may run (CODEMODE_MAX_JOB_TIME). */
  maxJobSeconds?: number;
}

/** Receives a run's output as the sandbox produces it (before the per-run cap applies). */
export type OutputListener = (stream: "stdout" | "stderr", text: string) => void;

/** How one run goes. */
export interface RunOptions {
  /** Seconds the code may run before the sandbox interrupts it. */
  timeout: number;
  /** Hears stdout/stderr as the sandbox produces them (the result still carries them). */
  onOutput?: OutputListener;
  /** Aborting interrupts the run the way its timeout would; the result's status is "cancelled". */
  signal?: AbortSignal;
  /** Tags the run's log lines and the upstream calls it makes. */
  requestId?: string;
  /** Where the run's artifacts are kept; without one they are dropped. */
  artifacts?: ArtifactStore;
  /** Asks the user about calls that need approval; the run's clock stops while it waits. */
  approve?: Approver;
}

interface ActiveRun {
  id: string;
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  displays: DisplayCollector;
  finish: (frame: DoneFrame) => void;
  controller: AbortController;
  onOutput?: OutputListener;
  /** The log scope calls from the sandbox are served in (the frame reader has none of its own). */
  scope?: LogScope;
  requestId?: string;
  cancelled: boolean;
  artifacts?: ArtifactReceiver;
  /** Pushes the host's deadline back while artifacts arrive (within a fixed budget). */
  extend?: () => void;
  calls: RunCalls;
}

const encoder = new TextEncoder();
/** Deepest value sent to the sandbox; CPython's json decoder gives up near its recursion limit (1000). */
const MAX_VALUE_DEPTH = 500;
const CANCELLED_BEFORE_START = "Cancelled by the client before the run started";
/** How far past its timeout (plus grace) a run may go while its artifacts are still arriving. */
const ARTIFACT_BUDGET_MS = 60_000;
/** Calls that arrive with no run active (late ones): answered, but nothing is waiting for them. */
const NO_RUN: RpcContext = { session: "", signal: AbortSignal.abort() };

/** A persistent sandbox running the codemode Python runtime. */
export class SandboxSession {
  #options: SandboxSessionOptions;
  #process?: SandboxProcess;
  #writer?: WritableStreamDefaultWriter<Uint8Array>;
  #run?: ActiveRun;
  #queue: Promise<unknown> = Promise.resolve();
  #alive = false;
  #ready?: (python: string) => void;
  #stderrTail = "";
  #exitWaiters = new Set<(reason: string) => void>();
  #runs = 0;
  #launched = false;
  #exitCounted = false;
  #files = new FileSender((frame) => this.#send(frame));
  readonly #jobs: SessionJobs;
  /** Set by kill(): a start still waiting for the runtime ends the sandbox it gets. */
  #stopped = false;
  /** Frames from the sandbox that were dropped as malformed or oversized. */
  malformedFrames = 0;
  /** Python version the sandbox reported. */
  python = "";
  /** When the sandbox became ready. */
  startedAt?: Date;

  /** Creates a session; nothing starts until `start()`. */
  constructor(options: SandboxSessionOptions) {
    this.#options = options;
    this.#jobs = new SessionJobs({
      session: options.sandbox.name,
      maxJobs: options.maxJobs ?? 16,
      maxJobSeconds: options.maxJobSeconds ?? 3600,
      cancel: (id, reason) => void this.#send({ type: "cancel_job", id, reason }).catch(() => {}),
    });
  }

  /** The background jobs sandbox code left running (they go on between runs). */
  get jobs(): SessionJobs {
    return this.#jobs;
  }

  /** The sandbox's name (its container name). */
  get name(): string {
    return this.#options.sandbox.name;
  }

  /** The runtime plugin's name (podman, docker, ...). */
  get runtime(): string {
    return this.#options.runtime.name;
  }

  /** What isolates the sandbox from the host: container, gvisor or wasm. */
  get isolation(): Isolation {
    return isolationOf(this.#options.runtime);
  }

  /** True while the sandbox process is running and usable. */
  get alive(): boolean {
    return this.#alive;
  }

  /** Starts the sandbox and waits until its runtime is ready. */
  async start(): Promise<void> {
    const o = this.#options;
    const started = performance.now();
    this.#process = await o.runtime.start(o.sandbox);
    if (this.#stopped) {
      // Killed while the runtime was still launching it: it must not run on unowned.
      await this.#process.kill();
      throw new Error(`Sandbox "${this.name}" was stopped before it started`);
    }
    this.#alive = true;
    const { channel, stdin, stdout, stderr } = this.#process;
    this.#writer = stdin.getWriter();
    this.#writer.closed.catch(() => {});
    const ready = new Promise<string>((resolve) => (this.#ready = resolve));
    void this.#readStderr(stderr);
    void this.#process.exited.then((code) => this.#onExit(code));
    // The bootstrap always goes over stdin; with a direct channel every later frame uses it instead.
    this.#send(withChannel(o.bootstrap, channel?.fd)).catch(() => {});
    if (channel) {
      this.#writer = channel.writable.getWriter();
      this.#writer.closed.catch(() => {});
      void this.#readFrames(channel.readable);
      void stdout.pipeTo(new WritableStream()).catch(() => {});
    } else {
      void this.#readFrames(stdout);
    }
    const ms = o.startTimeoutMs ?? 60_000;
    const outcome = await Promise.race([
      ready.then((python) => ({ python })),
      this.#exitReason().then((reason) => ({ failed: reason })),
      sleep(ms).then(() => ({ failed: `the sandbox did not become ready within ${ms / 1000}s` })),
    ]);
    if ("failed" in outcome) {
      stats.sandboxLaunched(0, false);
      await this.kill();
      const detail = this.#stderrTail.trim();
      throw new Error(
        `Sandbox "${this.name}" failed to start: ${outcome.failed}${detail ? `: ${detail}` : ""}`,
      );
    }
    this.python = outcome.python;
    this.startedAt = new Date();
    const startMs = performance.now() - started;
    this.#launched = true;
    stats.sandboxLaunched(startMs, true, {
      name: this.name,
      runtime: this.runtime,
      isolation: this.isolation,
    });
    log.info("sandbox ready", {
      sandbox: this.name,
      runtime: o.runtime.name,
      isolation: this.isolation,
      ms: Math.round(startMs),
    });
  }

  /** Runs code; runs on one session never overlap. */
  execute(code: string, options: RunOptions): Promise<RunResult> {
    const next = this.#queue.then(() => this.#execute(code, options)).then((result) =>
      this.#finished(result)
    );
    this.#queue = next.catch(() => {});
    return next;
  }

  /** Puts files into the sandbox, between runs; rejects with the first file that could not be written. */
  putFiles(files: SandboxFile[]): Promise<void> {
    const next = this.#queue.then(async () => {
      if (!this.#alive) throw new Error(`Sandbox "${this.name}" is not running`);
      for (const file of files) await this.#files.put(file);
    });
    this.#queue = next.catch(() => {});
    return next;
  }

  /** Asks the sandbox to exit, then makes sure it is gone; `reason` is what stats count the exit as. */
  async close(reason = "closed"): Promise<void> {
    this.#ended(reason);
    this.#jobs.close(reason);
    if (this.#alive) {
      await Promise.race([this.#send({ type: "shutdown" }).catch(() => {}), sleep(200)]);
      await Promise.race([this.#process?.exited, sleep(500)]);
    }
    await this.kill(reason);
  }

  /** Removes the sandbox at once. */
  async kill(reason = "killed"): Promise<void> {
    this.#stopped = true;
    this.#ended(reason);
    this.#jobs.close(reason);
    this.#alive = false;
    await this.#process?.kill();
  }

  async #execute(code: string, options: RunOptions): Promise<RunResult> {
    const { timeout: timeoutSeconds, onOutput, signal } = options;
    const started = performance.now();
    if (!this.#alive) throw new Error(`Sandbox "${this.name}" is not running`);
    if (signal?.aborted) {
      return { status: "cancelled", stdout: "", stderr: "", error: CANCELLED_BEFORE_START, duration: 0 };
    }
    const id = `run-${++this.#runs}-${crypto.randomUUID()}`;
    const maxOutput = this.#options.maxOutput;
    // Calls a background job makes that need approval are put to whoever the latest run would ask.
    if (options.approve) this.#jobs.approver = options.approve;
    let finish!: (frame: DoneFrame) => void;
    const done = new Promise<DoneFrame>((resolve) => (finish = resolve));
    const scope = currentLogScope() ?? (options.requestId ? { requestId: options.requestId } : undefined);
    const controller = new AbortController();
    const requestId = options.requestId ?? scope?.requestId;
    const graceMs = this.#options.graceMs ?? 2000;
    // The host's deadline, a little after the sandbox's own; both stop while the user is being asked.
    const clock = new RunClock(timeoutSeconds * 1000 + graceMs, {
      onPause: () => this.#send({ type: "pause", id }).catch(() => {}),
      onResume: () => this.#send({ type: "resume", id }).catch(() => {}),
    });
    const run: ActiveRun = {
      id,
      stdout: new OutputBuffer(maxOutput),
      stderr: new OutputBuffer(maxOutput),
      displays: new DisplayCollector(this.#options.maxDisplay ?? DEFAULT_MAX_DISPLAY),
      finish,
      controller,
      onOutput,
      scope,
      requestId,
      cancelled: false,
      ...(options.artifacts
        ? {
          artifacts: new ArtifactReceiver(options.artifacts, MAX_ARTIFACTS_PER_RUN, (why) =>
            this.#malformed(why)),
        }
        : {}),
      calls: new RunCalls(this.#options.session ?? this.name, {
        signal: controller.signal,
        requestId,
        clock,
        approve: options.approve,
      }),
    };
    this.#run = run;
    const deadline = clock.expired;
    run.extend = () => clock.extend(graceMs, ARTIFACT_BUDGET_MS);
    // A cancel is the timeout's interrupt, early; a run that ignores it is killed after the same grace.
    let cancelTimer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const cancelled = new Promise<"cancelled">((resolve) => {
      onAbort = () => {
        run.cancelled = true;
        run.controller.abort(signal?.reason);
        // The abort comes from the transport's context: log in the run's, so the line names its request.
        const note = () => log.info("cancelling the run", { sandbox: this.name });
        if (scope) withLogScope(scope, note);
        else note();
        this.#send({ type: "interrupt", id }).catch(() => {});
        cancelTimer = setTimeout(() => resolve("cancelled"), graceMs);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    const record = () => ({ ...run, duration: (performance.now() - started) / 1000, timeoutSeconds });
    const result = (end: RunEnd) => withJobNotes(run.calls.finish(runResult(end, record())), this.#jobs);
    // Artifacts that arrived are kept even when the run was stopped: they are finished after the kill.
    const withFiles = async (r: RunResult) => withArtifacts(r, await run.artifacts?.finish());
    try {
      await this.#send({ type: "execute", id, code, timeout: timeoutSeconds });
      const outcome = await Promise.race([done, deadline, cancelled, this.#exitReason()]);
      if (outcome === "deadline" || outcome === "cancelled") {
        const stopped = result({ stopped: outcome });
        await this.kill(outcome === "deadline" ? "timeout" : "cancelled");
        return await withFiles(stopped);
      }
      if (typeof outcome === "string") {
        const exited = result({ exited: outcome });
        await this.kill("crashed");
        return await withFiles(exited);
      }
      return await withFiles(result(outcome));
    } catch (error) {
      await this.kill("channel-failure");
      return await withFiles(result({ channelFailed: (error as Error).message }));
    } finally {
      clock.stop();
      clearTimeout(cancelTimer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      run.controller.abort();
      if (this.#run === run) this.#run = undefined;
    }
  }

  /** Counts and logs a finished run (in the caller's log scope, so the line carries its request id). */
  #finished(result: RunResult): RunResult {
    stats.run(result.status, result.duration * 1000);
    const fields = { sandbox: this.name, status: result.status, ms: Math.round(result.duration * 1000) };
    if (result.sessionLost) log.warn("sandbox lost", { ...fields, error: result.error?.slice(0, 300) });
    else log.debug("run finished", fields);
    return result;
  }

  /** Records how a launched sandbox ended, once: the first reason given wins. */
  #ended(reason: string): void {
    if (!this.#launched || this.#exitCounted) return;
    this.#exitCounted = true;
    stats.sandboxExited(reason, this.name);
  }

  #send(frame: HostFrame): Promise<void> {
    return this.#write(JSON.stringify(frame));
  }

  /** Writes one serialised frame. */
  async #write(line: string): Promise<void> {
    if (!this.#writer) throw new Error("Sandbox is not started");
    await this.#writer.write(encoder.encode(line + "\n"));
  }

  async #readFrames(stdout: ReadableStream<Uint8Array>): Promise<void> {
    const max = this.#options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    try {
      for await (
        const line of readFrames(stdout, max, (bytes) => this.#malformed(`oversized frame (${bytes} bytes)`))
      ) {
        if (!line.trim()) continue;
        let parsed: SandboxFrame;
        try {
          const raw = JSON.parse(line);
          const result = SandboxFrame.safeParse(raw);
          if (!result.success) {
            this.#malformed("frame does not match the protocol");
            this.#refuseCall(raw);
            continue;
          }
          parsed = result.data;
        } catch {
          this.#malformed("frame is not JSON");
          continue;
        }
        const pending = this.#handle(parsed);
        // Artifact pieces are written before the next frame is read: the channel is the backpressure.
        if (pending) await pending;
      }
    } catch (error) {
      log.debug("sandbox stdout ended with an error", { sandbox: this.name, error: String(error) });
    }
  }

  /** A call the host can't serve still gets an answer, or the sandbox would wait for it until the timeout. */
  #refuseCall(raw: unknown): void {
    const frame = raw as { type?: unknown; id?: unknown } | null;
    const id = frame?.id;
    if (frame?.type !== "rpc" || !(typeof id === "string" || Number.isFinite(id))) return;
    const reply = rpcError(
      id as string | number,
      "ValueError",
      "Malformed host call: the method must be a short name and params an object",
    );
    this.#send(reply).catch(() => {});
  }

  #handle(frame: SandboxFrame): Promise<void> | void {
    const run = this.#run;
    switch (frame.type) {
      case "ready":
        this.#ready?.(frame.python ?? "");
        this.#ready = undefined;
        return;
      case "output":
        if (run && (frame.id === undefined || frame.id === run.id)) {
          run[frame.stream].append(frame.data);
          this.#notify(run, frame.stream, frame.data);
        }
        return;
      case "display":
        // Like output, a display from a thread that outlived its run is ignored.
        if (run && (frame.id === undefined || frame.id === run.id)) {
          const problem = run.displays.accept(frame, run.stdout.length);
          if (problem) this.#malformed(problem);
        }
        return;
      case "done":
        if (run && frame.id === run.id) run.finish(frame);
        else this.#malformed("done frame for a run that is not active");
        return;
      case "rpc":
        void this.#serveRpc(frame, run);
        return;
      case "artifact":
      case "artifact_skipped":
        if (!run || frame.id !== run.id) {
          return this.#malformed("artifact frame for a run that is not active");
        }
        if (frame.type === "artifact" && frame.data) run.extend?.();
        return run.artifacts?.take(frame).catch((error) =>
          log.warn("could not keep an artifact", { sandbox: this.name, error: String(error) })
        );
      case "file_done":
        this.#files.done(frame);
        return;
      case "job":
      case "job_output": {
        const problem = this.#jobs.take(frame);
        if (problem) this.#malformed(problem);
        return;
      }
    }
  }

  async #serveRpc(frame: Extract<SandboxFrame, { type: "rpc" }>, run: ActiveRun | undefined): Promise<void> {
    let reply: Extract<HostFrame, { type: "rpc_result" }>;
    const started = performance.now();
    // A call a background job made is served under the job's context, whether or not a run is active.
    const session = this.#options.session ?? this.name;
    const jobContext = frame.job === undefined ? undefined : this.#jobs.context(frame.job, session);
    const context = jobContext ?? run?.calls.context ?? { ...NO_RUN, session };
    const scope = jobContext ? { requestId: jobContext.requestId } : run?.scope;
    const call = () => {
      if (frame.job !== undefined && !jobContext) {
        throw new RpcError(
          "RuntimeError",
          `Job ${frame.job} is not running here, so it cannot call the host`,
        );
      }
      if (jobContext && frame.method === "call_tool") this.#jobs.toolCall(frame.job!);
      return this.#options.rpc(frame.method, frame.params, context);
    };
    try {
      const value = await (scope ? withLogScope(scope, call) : call());
      reply = { type: "rpc_result", id: frame.id, ok: true, value: value ?? null };
      // Python's json module recurses per level: a deeper value would kill the sandbox's frame reader.
      if (nestingDepth(value, MAX_VALUE_DEPTH) > MAX_VALUE_DEPTH) {
        reply = rpcError(
          frame.id,
          "ToolError",
          `The result is nested more than ${MAX_VALUE_DEPTH} levels deep, which the sandbox cannot decode; ` +
            "ask the tool for a flatter shape",
        );
      }
    } catch (error) {
      reply = rpcError(frame.id, pythonErrorType(error), (error as Error)?.message ?? String(error));
    }
    // Serialised once, for the size check and for the wire: results can be megabytes.
    let line: string;
    try {
      line = JSON.stringify(reply);
    } catch (error) {
      reply = rpcError(
        frame.id,
        "ToolError",
        `The result cannot be sent to Python: ${(error as Error)?.message}`,
      );
      line = JSON.stringify(reply);
    }
    const max = this.#options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    if (line.length > max) {
      reply = rpcError(
        frame.id,
        "ToolError",
        `The result is ${mib(line.length)}, over the ${mib(max)} frame cap`,
      );
      line = JSON.stringify(reply);
    }
    stats.rpc(frame.method, performance.now() - started, reply.ok);
    if (this.#alive) await this.#write(line).catch(() => {});
  }

  #notify(run: ActiveRun, stream: "stdout" | "stderr", text: string): void {
    // A listener that throws must not stop the frame reader; it just stops hearing.
    try {
      run.onOutput?.(stream, text);
    } catch (error) {
      run.onOutput = undefined;
      log.warn("output listener failed", { sandbox: this.name, error: String(error) });
    }
  }

  #malformed(reason: string): void {
    this.malformedFrames++;
    stats.malformedFrame();
    log.warn("dropped a malformed frame from the sandbox", { sandbox: this.name, reason });
  }

  async #readStderr(stderr: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of stderr) {
        const text = decoder.decode(chunk, { stream: true });
        this.#stderrTail = (this.#stderrTail + text).slice(-4096);
        log.debug("sandbox stderr", { sandbox: this.name, text: text.slice(0, 2048) });
      }
    } catch { /* the process is gone */ }
  }

  #onExit(code: number | null): void {
    const wasAlive = this.#alive;
    this.#alive = false;
    const reason = code === null ? "killed" : `exit code ${code}`;
    if (wasAlive && !this.#exitCounted) {
      this.#ended("crashed");
      log.warn("sandbox exited", { sandbox: this.name, reason });
    } else {
      // An exit we asked for (close, kill) is routine.
      log.debug("sandbox exited", { sandbox: this.name, reason });
    }
    this.#jobs.close(reason);
    for (const waiter of this.#exitWaiters) waiter(reason);
    this.#exitWaiters.clear();
    this.#files.failAll(`the sandbox ended (${reason})`);
  }

  #exitReason(): Promise<string> {
    if (!this.#alive) return Promise.resolve("the sandbox is not running");
    return new Promise((resolve) => this.#exitWaiters.add(resolve));
  }
}

/** `result` with notes about background work that ended since the last run. */
function withJobNotes(result: RunResult, jobs: SessionJobs): RunResult {
  const notes = jobs.takeNotes();
  return notes.length ? { ...result, notes: [...result.notes ?? [], ...notes] } : result;
}

function rpcError(
  id: string | number,
  type: string,
  message: string,
): Extract<HostFrame, { type: "rpc_result" }> {
  return { type: "rpc_result", id, ok: false, error: { type, message } };
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    (t as { unref?: () => void }).unref?.();
  });
}

/** The bootstrap frame, telling the sandbox which fd carries frames when a direct channel exists. */
function withChannel(bootstrap: HostFrame, fd: number | undefined): HostFrame {
  if (fd === undefined || bootstrap.type !== "bootstrap") return bootstrap;
  return { ...bootstrap, config: { ...bootstrap.config, channel_fd: fd } };
}
