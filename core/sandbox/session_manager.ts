/**
 * Keeps one sandbox session per key (an MCP client connection, a `codemode run`): started on first
 * use, kept warm, stopped when idle or on shutdown. Containers are named and labelled with their owner
 * so that leftovers of a crashed codemode are reaped at the next start.
 * @module
 */
import { hostname } from "node:os";
import type { RuntimePlugin, SandboxLimits, SandboxMount } from "../contracts/runtime.ts";
import type { RunResult } from "../contracts/output.ts";
import type { HostFrame } from "./protocol.ts";
import type { RpcHandler } from "../host_api/rpc.ts";
import { type RunOptions, SandboxSession } from "./session.ts";
import { RunSlots } from "./run_slots.ts";
import { log } from "../observe/log.ts";
import { processAlive } from "../process_alive.ts";
import { stats } from "../observe/stats.ts";
import type { SandboxFile } from "./file_sender.ts";
import { copyMounts } from "./mount_copy.ts";
import type { SessionInfo } from "../observe/serve_state.ts";

export type { OutputListener, RunOptions } from "./session.ts";

/** Label keys every sandbox carries. */
export const LABELS = {
  managed: "codemode.managed",
  owner: "codemode.owner-pid",
  host: "codemode.host",
  session: "codemode.session",
} as const;

/** The labels that mark a sandbox as this process's, so a later codemode can reap it if we crash. */
export function ownerLabels(session: string): Record<string, string> {
  return {
    [LABELS.managed]: "true",
    [LABELS.owner]: String(process.pid),
    [LABELS.host]: hostname(),
    [LABELS.session]: session.slice(0, 64),
  };
}

/** How sessions are made. */
export interface SessionManagerOptions {
  /** Resolves the runtime to use (detection may be slow, so it is lazy and shared). */
  runtime: () => Promise<RuntimePlugin>;
  image: string;
  limits: SandboxLimits;
  /** The bootstrap command run inside the sandbox. */
  command: string[];
  /** The first frame of a sandbox of the session `key`: the runtime source and its configuration. */
  bootstrap: (key: string) => HostFrame;
  rpc: RpcHandler;
  maxOutput: number;
  /** Cap on one run's displays, in bytes. */
  maxDisplay?: number;
  /**
   * Seconds a session may sit idle before it is stopped: counted from its last run or its jobs' last
   * activity, whichever is later; a session with running jobs is not idle (within CODEMODE_MAX_JOB_TIME).
   */
  idleTimeout: number;
  /** Most background jobs one session may run (CODEMODE_MAX_JOBS). */
  maxJobs?: number;
  /** Seconds a background job may run (CODEMODE_MAX_JOB_TIME). */
  maxJobSeconds?: number;
  /** Seconds after a run's timeout before a sandbox that did not stop is killed. */
  graceSeconds?: number;
  /**
   * Most live sessions. A new session beyond it stops the least recently used idle one; when every
   * session is running code, the new one's run is refused with an error result.
   */
  maxSessions?: number;
  /** Most runs executing at once across sessions; the others wait their turn within their timeout. */
  maxRuns?: number;
  /** Host folders every sandbox sees. */
  mounts?: SandboxMount[];
  /** Bytes of mounted files copied in where the runtime cannot bind-mount (Pyodide). */
  mountCopyBytes?: number;
  /**
   * Hears that a sandbox of `runtime` failed to start (so a cached runtime verdict can be dropped);
   * resolves true to have the start tried once more with a freshly resolved runtime.
   */
  onStartFailure?: (runtime: RuntimePlugin, error: unknown) => Promise<boolean>;
}

interface Entry {
  session: Promise<SandboxSession>;
  /** The session being started, so a close can kill it before its start finishes. */
  sandbox?: SandboxSession;
  /** Set once the session is ready (or failed). */
  settled: boolean;
  /** Set when the entry was closed: a start still under way stops instead of finishing. */
  stopped: boolean;
  /** The session once it started. */
  ready?: SandboxSession;
  lastUsedAt: Date;
  runs: number;
  idle?: ReturnType<typeof setTimeout>;
  busy: number;
  /** When a run last started or ended here (a counter, for least-recently-used eviction). */
  used: number;
}

/** The sessions of one codemode process. */
export class SessionManager {
  #options: SessionManagerOptions;
  #entries = new Map<string, Entry>();
  #closed = false;
  #counter = 0;
  #uses = 0;
  /** The runtime once a session or the reaper resolved it (shutdown must not select one). */
  #runtime?: RuntimePlugin;
  readonly #slots: RunSlots;
  readonly #tag = Math.random().toString(36).slice(2, 8);
  /** Notes from starting a session (mounted files left out), for its first run's result. */
  #startNotes = new WeakMap<SandboxSession, string[]>();

  /** Creates a manager; no sandbox starts until the first run. */
  constructor(options: SessionManagerOptions) {
    this.#options = options;
    this.#slots = new RunSlots(options.maxRuns);
  }

  /** Number of live sessions. */
  get size(): number {
    return this.#entries.size;
  }

  /** Whether session `key` has a run in progress (executing or waiting for a run slot). */
  busy(key: string): boolean {
    return (this.#entries.get(key)?.busy ?? 0) > 0;
  }

  /** Whether a new session could get a sandbox now: under the cap, or an idle one would make way. */
  hasRoom(): boolean {
    const max = this.#options.maxSessions;
    if (this.#closed) return false;
    if (max === undefined || this.#entries.size < max) return true;
    for (const entry of this.#entries.values()) if (entry.busy === 0) return true;
    return false;
  }

  /** Runs code in the session for `key`, starting the session if needed. Throws when it can't start. */
  async run(key: string, code: string, options: RunOptions): Promise<RunResult> {
    if (this.#closed) throw new Error("codemode is shutting down");
    const existing = this.#entries.get(key);
    // A sandbox that ended between runs (killed from outside, crashed while idle) is replaced, and the
    // run says its state is gone instead of failing with "not running". One that never started (a
    // prewarm that failed) is simply started again.
    const state = existing && existing.busy === 0
      ? await existing.session.then((s) => s.alive ? "alive" : "ended", () => "failed")
      : "alive";
    if (existing && state !== "alive") {
      this.#drop(key, existing);
      const result = await this.run(key, code, options);
      if (state === "failed") return result;
      const note = "the previous sandbox had ended since the last run, so this ran in a fresh one: " +
        "earlier variables and imports are gone";
      return { ...result, notes: [note, ...result.notes ?? []] };
    }
    const entry = this.#entry(key);
    if (!entry) return notRun("error", this.#fullMessage());
    entry.busy++;
    entry.runs++;
    entry.used = ++this.#uses;
    entry.lastUsedAt = new Date();
    if (entry.idle) clearTimeout(entry.idle);
    try {
      const session = await entry.session;
      let result = await this.#execute(session, code, options);
      if (!session.alive) this.#drop(key, entry);
      const notes = this.#startNotes.get(session);
      this.#startNotes.delete(session);
      if (notes?.length) result = { ...result, notes: [...notes, ...result.notes ?? []] };
      return result;
    } catch (error) {
      this.#drop(key, entry);
      throw error;
    } finally {
      entry.busy--;
      entry.used = ++this.#uses;
      entry.lastUsedAt = new Date();
      if (entry.busy === 0 && this.#entries.get(key) === entry) this.#armIdle(key, entry);
    }
  }

  /** The live sessions and their sandboxes. */
  list(): SessionInfo[] {
    return [...this.#entries].map(([key, entry]) => this.#info(key, entry));
  }

  #info(key: string, entry: Entry): SessionInfo {
    const jobs = entry.ready?.jobs.list() ?? [];
    return {
      key,
      state: !entry.ready ? "starting" : entry.busy ? "running" : "idle",
      ...(entry.ready
        ? {
          sandbox: entry.ready.name,
          runtime: entry.ready.runtime,
          isolation: entry.ready.isolation,
          python: entry.ready.python,
          startedAt: entry.ready.startedAt?.toISOString(),
        }
        : {}),
      lastUsedAt: entry.lastUsedAt.toISOString(),
      runs: entry.runs,
      ...(jobs.length ? { jobs } : {}),
    };
  }

  /** The live jobs of the session for `key` (0 when it has no sandbox). */
  liveJobs(key: string): number {
    return this.#entries.get(key)?.ready?.jobs.live ?? 0;
  }

  /** Starts the session for `key` ahead of its first run (e.g. to hide start-up latency). */
  async warm(key: string): Promise<void> {
    const entry = this.#entry(key);
    if (!entry) throw new Error(this.#fullMessage());
    await entry.session;
  }

  /** Puts files into the session for `key` (started if needed) before its next run. */
  async putFiles(key: string, files: SandboxFile[]): Promise<void> {
    const entry = this.#entry(key);
    if (!entry) throw new Error(this.#fullMessage());
    await (await entry.session).putFiles(files);
  }

  /**
   * Starts the session for `key` in the background, before anything asks for it: a first run then finds
   * it ready or joins its start. Skipped when `key` has a session already or the session cap is reached
   * (a prewarm never evicts another session). An unused prewarmed sandbox is stopped by the idle
   * timeout like any other. Returns whether a start began.
   */
  prewarm(key: string): boolean {
    if (this.#closed || this.#entries.has(key)) return false;
    const max = this.#options.maxSessions;
    if (max !== undefined && this.#entries.size >= max) {
      log.info("not prewarming a sandbox: the session cap is reached", { session: key, maxSessions: max });
      return false;
    }
    const entry = this.#entry(key)!;
    log.info("prewarming a sandbox", { session: key });
    entry.session.then(
      () => {
        if (entry.busy === 0 && this.#entries.get(key) === entry) this.#armIdle(key, entry);
      },
      (error) => {
        if (!entry.stopped) {
          log.warn("prewarming a sandbox failed; the first run tries again", { error: String(error) });
        }
      },
    );
    return true;
  }

  /** Stops the session for `key` (its client went away); a later run for `key` starts a fresh one. */
  async close(key: string): Promise<void> {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    await this.#stop(entry, "client-gone");
  }

  /** Stops every session and removes their sandboxes. */
  async closeAll(): Promise<void> {
    this.#closed = true;
    const entries = [...this.#entries.values()];
    this.#entries.clear();
    await Promise.all(entries.map((entry) => this.#stop(entry, "shutdown")));
    // A sandbox whose removal failed (engine binary gone) must not outlive the server: one last, bounded try.
    if (this.#runtime?.settle && !(await this.#runtime.settle(3_000))) {
      log.warn("sandbox containers could not be removed; the next codemode start reaps them");
    }
  }

  /** Removes sandboxes left by codemode processes on this host that no longer run. */
  async reapLeftovers(): Promise<number> {
    const runtime = this.#runtime = await this.#options.runtime();
    const host = hostname();
    let reaped = 0;
    for (const sandbox of await runtime.listManaged()) {
      const owner = Number(sandbox.labels[LABELS.owner]);
      if (sandbox.labels[LABELS.host] !== host || !Number.isInteger(owner)) continue;
      if (owner === process.pid || processAlive(owner)) continue;
      await runtime.remove(sandbox.name);
      reaped++;
    }
    if (reaped) log.info("reaped leftover sandboxes", { count: reaped });
    return reaped;
  }

  /** Runs `code` once a run slot is free; the wait counts against the run's timeout. */
  async #execute(session: SandboxSession, code: string, options: RunOptions): Promise<RunResult> {
    const queued = this.#slots.full;
    const asked = performance.now();
    const release = await this.#slots.acquire(options.timeout * 1000, options.signal);
    const waited = (performance.now() - asked) / 1000;
    const cap = `CODEMODE_MAX_RUNS allows ${this.#slots.max} at once`;
    if (!release) {
      return options.signal?.aborted
        ? notRun("cancelled", `Cancelled while waiting for a run slot (${cap}); nothing ran`, waited)
        : notRun(
          "timeout",
          `Waited ${options.timeout}s for a run slot and none came free (${cap}); nothing ran, the session ` +
            "is intact: try again when other runs have finished",
          waited,
        );
    }
    try {
      // Only a real wait is charged: a free slot's microseconds would show up as "timed out after 0.99999s".
      const timeout = queued ? Math.max(0.05, options.timeout - waited) : options.timeout;
      const result = await session.execute(code, { ...options, timeout });
      if (!queued) return result;
      const note = `waited ${waited.toFixed(1)}s for a run slot (${cap}); that counted against the timeout`;
      return { ...result, notes: [note, ...result.notes ?? []] };
    } finally {
      release();
    }
  }

  /** The session for `key`, made if needed; undefined when the session cap leaves no room. */
  #entry(key: string): Entry | undefined {
    let entry = this.#entries.get(key);
    if (!entry) {
      if (!this.#roomForOneMore()) return undefined;
      // The start needs its entry (to see a close that comes while it runs), so the promise comes second.
      const created = {
        settled: false,
        stopped: false,
        busy: 0,
        used: ++this.#uses,
        lastUsedAt: new Date(),
        runs: 0,
      } as Entry;
      created.session = this.#start(key, created);
      created.session.then((s) => {
        created.settled = true;
        created.ready = s;
      }, () => {
        created.settled = true;
        this.#drop(key, created);
      });
      this.#entries.set(key, created);
      entry = created;
    }
    return entry;
  }

  async #start(key: string, entry: Entry): Promise<SandboxSession> {
    const o = this.#options;
    for (let attempt = 1;; attempt++) {
      const runtime = this.#runtime = await o.runtime();
      this.#checkStillWanted(entry);
      const session = new SandboxSession({
        runtime,
        sandbox: {
          name: `codemode-${process.pid}-${this.#tag}-${++this.#counter}`,
          image: o.image,
          command: o.command,
          limits: o.limits,
          labels: ownerLabels(key),
          ...(o.mounts?.length && runtime.mountMode === "bind" ? { mounts: o.mounts } : {}),
        },
        bootstrap: o.bootstrap(key),
        rpc: o.rpc,
        session: key,
        maxOutput: o.maxOutput,
        maxDisplay: o.maxDisplay,
        graceMs: (o.graceSeconds ?? 2) * 1000,
        maxJobs: o.maxJobs,
        maxJobSeconds: o.maxJobSeconds,
      });
      entry.sandbox = session;
      try {
        await session.start();
      } catch (error) {
        this.#checkStillWanted(entry);
        const again = await o.onStartFailure?.(runtime, error).catch(() => false);
        if (!again || attempt > 1) throw error;
        log.info("a sandbox did not start on a cached runtime verdict; trying again after detecting afresh", {
          runtime: runtime.name,
          error: String(error),
        });
        continue;
      }
      if (o.mounts?.length) await this.#mountByCopy(runtime, session);
      if (this.#closed || entry.stopped) {
        await session.close("shutdown");
        this.#checkStillWanted(entry);
      }
      return session;
    }
  }

  #checkStillWanted(entry: Entry): void {
    if (this.#closed) throw new Error("codemode is shutting down");
    if (entry.stopped) throw new Error("the session was closed before its sandbox started");
  }

  /** Stops an entry's sandbox: at once if it is still starting, else with a shutdown frame first. */
  async #stop(entry: Entry, reason: string): Promise<void> {
    entry.stopped = true;
    if (entry.idle) clearTimeout(entry.idle);
    if (!entry.settled) await entry.sandbox?.kill(reason);
    await entry.session.then((s) => s.close(reason), () => {});
  }

  /** Copies the mounts in where the runtime cannot bind-mount them; a runtime with no mounts is refused. */
  async #mountByCopy(runtime: RuntimePlugin, session: SandboxSession): Promise<void> {
    const mounts = this.#options.mounts ?? [];
    if (runtime.mountMode === "bind") return;
    if (runtime.mountMode !== "copy") {
      await session.close("shutdown");
      throw new Error(
        `The ${runtime.name} runtime cannot mount host folders (${
          mounts.map((m) => m.target).join(", ")
        }): use podman, docker or pyodide, or remove CODEMODE_MOUNTS / the config file's mounts`,
      );
    }
    const copy = await copyMounts(mounts, this.#options.mountCopyBytes ?? 64 * 2 ** 20);
    try {
      await session.putFiles(copy.files);
    } catch (error) {
      await session.close("shutdown");
      throw new Error(`Cannot copy the mounted files into the sandbox: ${(error as Error).message}`);
    }
    log.info("copied mounts into the sandbox", {
      sandbox: session.name,
      files: copy.files.length,
      bytes: copy.bytes,
    });
    if (copy.notes.length) this.#startNotes.set(session, copy.notes);
  }

  /** Under the session cap, or made so by stopping the least recently used idle session. */
  #roomForOneMore(): boolean {
    const max = this.#options.maxSessions;
    if (max === undefined || this.#entries.size < max) return true;
    // Sessions with background jobs running go last: stopping one stops its jobs.
    let lru: [string, Entry] | undefined;
    const jobs = (entry: Entry) => entry.ready?.jobs.live ? 1 : 0;
    for (const pair of this.#entries) {
      if (pair[1].busy > 0) continue;
      if (
        !lru || jobs(pair[1]) < jobs(lru[1]) || (jobs(pair[1]) === jobs(lru[1]) && pair[1].used < lru[1].used)
      ) {
        lru = pair;
      }
    }
    if (!lru) return false;
    const [key, entry] = lru;
    this.#entries.delete(key);
    log.info("stopping the least recently used idle sandbox to stay within the session cap", {
      session: key,
      maxSessions: max,
    });
    void this.#stop(entry, "closed");
    return true;
  }

  #fullMessage(): string {
    const max = this.#options.maxSessions;
    return `All ${max} sandbox sessions are running code (CODEMODE_MAX_SESSIONS=${max}), so no new session ` +
      "can start; try again when a run has finished";
  }

  #armIdle(key: string, entry: Entry, ms = this.#options.idleTimeout * 1000): void {
    if (entry.idle) clearTimeout(entry.idle);
    entry.idle = setTimeout(() => {
      if (entry.busy > 0 || this.#entries.get(key) !== entry) return;
      // Idle counts from the last run or the jobs' last activity; running jobs keep the session (the
      // host cancels each at CODEMODE_MAX_JOB_TIME, so this cannot go on for ever).
      const jobs = entry.ready?.jobs;
      const idleMs = this.#options.idleTimeout * 1000;
      if (jobs?.live) return this.#armIdle(key, entry);
      const quietMs = Date.now() - Math.max(entry.lastUsedAt.getTime(), jobs?.lastActivity ?? 0);
      if (quietMs < idleMs) return this.#armIdle(key, entry, idleMs - quietMs);
      this.#entries.delete(key);
      log.info("stopping idle sandbox", { session: key });
      void this.#stop(entry, "idle");
    }, ms);
    (entry.idle as { unref?: () => void }).unref?.();
  }

  #drop(key: string, entry: Entry): void {
    if (this.#entries.get(key) !== entry) return;
    this.#entries.delete(key);
    entry.stopped = true;
    if (entry.idle) clearTimeout(entry.idle);
    void entry.session.then((s) => s.kill(), () => {});
  }
}

/** The result of a run that never started: nothing ran, the session (if any) is untouched. */
function notRun(status: RunResult["status"], error: string, duration = 0): RunResult {
  // Counted like any other run, so stats show what the caps turned away.
  stats.run(status, duration * 1000);
  return { status, stdout: "", stderr: "", error, duration };
}
