/**
 * Background jobs of one sandbox session, as the host sees them. The sandbox's event loop keeps running
 * between runs, so sandbox code can leave work going (`runtime.start_job()`, or an asyncio task); the
 * sandbox reports each job in `job` frames (started, ended) and its output in `job_output` frames, and
 * names the job on every call it makes. Those frames are untrusted: the host keeps its own bounded record
 * (most live jobs, finished ones kept, output tail per job), serves a job's calls under its own context
 * (policy, approvals, an abort signal that ends with the job), and enforces CODEMODE_MAX_JOB_TIME itself:
 * past it, it asks the sandbox to cancel the job, and stops counting it as running shortly after whatever
 * the sandbox says, so a session cannot stay alive past its idle timeout by claiming a job.
 * @module
 */
import type { Approver } from "./approvals.ts";
import type { JobInfo, JobState } from "../observe/serve_state.ts";
import type { RpcContext } from "./rpc.ts";
import { log } from "../observe/log.ts";
import { stats } from "../observe/stats.ts";

export type { JobInfo, JobState };

/** The frames this record is built from (validated by the protocol's schema already). */
export type JobFrame =
  | {
    type: "job";
    id: string;
    name?: string;
    kind?: "job" | "task";
    state: JobState;
    error?: string;
  }
  | { type: "job_output"; id: string; stream: "stdout" | "stderr"; data: string };

/** Bounds on what the host keeps per session. */
export const JOB_LIMITS = {
  /** Finished jobs kept (the newest). */
  finished: 50,
  /** Characters of output kept per job (the latest). */
  outputTail: 16 * 1024,
  /** Characters of a job's name and error kept. */
  name: 200,
  error: 4000,
} as const;

/** How a session's jobs are kept. */
export interface SessionJobsOptions {
  /** The sandbox's name, for logs. */
  session: string;
  /** Most jobs that may run at once (CODEMODE_MAX_JOBS); a start frame beyond it is refused. */
  maxJobs: number;
  /** Seconds a job may run (CODEMODE_MAX_JOB_TIME). */
  maxJobSeconds: number;
  /** Asks the sandbox to cancel job `id`. */
  cancel(id: string, reason: string): void;
  /** Seconds a job asked to stop for running too long has before it counts as ended (default 10). */
  cancelGraceSeconds?: number;
}

interface Job {
  info: JobInfo;
  started: number;
  /** Aborted when the job ends: calls it still has in flight stop. */
  controller: AbortController;
  timer?: ReturnType<typeof setTimeout>;
}

/** The jobs of one sandbox session. */
export class SessionJobs {
  #options: SessionJobsOptions;
  #jobs = new Map<string, Job>();
  #unreported: JobInfo[] = [];
  #closed = false;
  /** When a job last did something (started, ended, printed, called the host), as Date.now(). */
  lastActivity = Date.now();
  /** Who a job's calls that need approval are put to (the session's latest run's approver). */
  approver?: Approver;

  /** Creates an empty record. */
  constructor(options: SessionJobsOptions) {
    this.#options = options;
  }

  /** How many jobs are running. */
  get live(): number {
    let n = 0;
    for (const job of this.#jobs.values()) if (job.info.state === "running") n++;
    return n;
  }

  /** Every job kept, oldest first. */
  list(): JobInfo[] {
    return [...this.#jobs.values()].map((job) => ({
      ...job.info,
      seconds: round((job.info.endedAt ? Date.parse(job.info.endedAt) : Date.now()) / 1000 - job.started),
    }));
  }

  /** Takes a frame about a job; returns why it was refused (a malformed frame), or undefined. */
  take(frame: JobFrame): string | undefined {
    if (this.#closed) return undefined;
    const job = this.#jobs.get(frame.id);
    if (frame.type === "job_output") {
      if (!job) return "output of an unknown job";
      if (job.info.state !== "running") return undefined; // it arrived as the host gave up on the job
      this.lastActivity = Date.now();
      job.info.output = (job.info.output + frame.data).slice(-JOB_LIMITS.outputTail);
      return undefined;
    }
    if (frame.state === "running") {
      if (job) return "a job started twice";
      if (this.live >= this.#options.maxJobs) {
        this.#options.cancel(frame.id, "over CODEMODE_MAX_JOBS");
        return `a job beyond CODEMODE_MAX_JOBS (${this.#options.maxJobs})`;
      }
      this.#start(frame);
      return undefined;
    }
    if (!job) return "the end of an unknown job";
    if (job.info.state !== "running") return undefined;
    this.#end(job, frame.state as Exclude<JobState, "running">, frame.error);
    return undefined;
  }

  /** What a call job `id` makes is served with; undefined for a job that is not running. */
  context(id: string, session: string): RpcContext | undefined {
    const job = this.#jobs.get(id);
    if (!job || job.info.state !== "running") return undefined;
    this.lastActivity = Date.now();
    const { signal } = job.controller;
    const approver = this.approver;
    return {
      session,
      signal,
      requestId: `${id}@${session}`,
      ...(approver ? { approve: (request) => approver(request, signal) } : {}),
    };
  }

  /** Counts a tool call job `id` made. */
  toolCall(id: string): void {
    const job = this.#jobs.get(id);
    if (job) job.info.toolCalls++;
  }

  /**
   * Notes for the next run's result about jobs that ended since the last one, so a model that forgot
   * them hears of them; each job is reported once.
   */
  takeNotes(): string[] {
    const ended = this.#unreported.splice(0);
    if (!ended.length) return [];
    const shown = ended.slice(0, 5).map((j) =>
      `${j.kind === "task" ? "task" : "job"} ${j.id} (${JSON.stringify(j.name)}) ${j.state}` +
      `${j.overtime ? " (ran past CODEMODE_MAX_JOB_TIME)" : ""}`
    );
    const more = ended.length > 5 ? `, and ${ended.length - 5} more` : "";
    return [
      `background work ended since the last run: ${shown.join("; ")}${more}; ` +
      "runtime.jobs() lists them, `await runtime.wait(job)` gives a value or raises its error",
    ];
  }

  /** The session ended: every running job ended with it. */
  close(reason: string): void {
    if (this.#closed) return;
    for (const job of this.#jobs.values()) {
      if (job.info.state === "running") this.#end(job, "cancelled", `the session ended (${reason})`);
    }
    this.#closed = true;
  }

  #start(frame: Extract<JobFrame, { type: "job" }>): void {
    const job: Job = {
      info: {
        id: frame.id,
        name: clean(frame.name ?? frame.id, JOB_LIMITS.name),
        kind: frame.kind ?? "job",
        state: "running",
        startedAt: new Date().toISOString(),
        seconds: 0,
        toolCalls: 0,
        output: "",
      },
      started: Date.now() / 1000,
      controller: new AbortController(),
    };
    this.#jobs.set(frame.id, job);
    this.lastActivity = Date.now();
    stats.jobStarted();
    const limit = this.#options.maxJobSeconds;
    job.timer = setTimeout(() => this.#overtime(job), limit * 1000);
    unref(job.timer);
    log.debug("background job started", { sandbox: this.#options.session, job: job.info.id });
  }

  #overtime(job: Job): void {
    if (job.info.state !== "running") return;
    const reason = `ran past CODEMODE_MAX_JOB_TIME (${this.#options.maxJobSeconds}s) and was cancelled`;
    job.info.overtime = true;
    log.warn("cancelling a background job that ran too long", {
      sandbox: this.#options.session,
      job: job.info.id,
      name: job.info.name,
      seconds: this.#options.maxJobSeconds,
    });
    this.#options.cancel(job.info.id, reason);
    // Whatever the sandbox does about it, the job stops counting as running soon.
    const grace = this.#options.cancelGraceSeconds ?? 10;
    job.timer = setTimeout(() => {
      if (job.info.state === "running") {
        this.#end(job, "cancelled", `${reason}; it did not stop within ${grace}s`);
      }
    }, grace * 1000);
    unref(job.timer);
  }

  #end(job: Job, state: Exclude<JobState, "running">, error?: string): void {
    clearTimeout(job.timer);
    job.info.state = state;
    job.info.endedAt = new Date().toISOString();
    if (error) job.info.error = clean(error, JOB_LIMITS.error);
    if (state !== "cancelled") delete job.info.overtime; // it ended on its own as the time ran out
    job.controller.abort();
    this.lastActivity = Date.now();
    stats.jobEnded(job.info.overtime ? "overtime" : state);
    this.#unreported.push(job.info);
    if (this.#unreported.length > JOB_LIMITS.finished) this.#unreported.shift();
    const finished = [...this.#jobs.values()].filter((j) => j.info.state !== "running");
    for (const old of finished.slice(0, Math.max(0, finished.length - JOB_LIMITS.finished))) {
      this.#jobs.delete(old.info.id);
    }
    log.debug("background job ended", { sandbox: this.#options.session, job: job.info.id, state });
  }
}

/** Control characters out (a name or error may reach a terminal through the logs), and clipped. */
function clean(text: string, max: number): string {
  // deno-lint-ignore no-control-regex
  const plain = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "");
  return plain.length <= max ? plain : plain.slice(0, max) + "...";
}

function round(seconds: number): number {
  return Math.round(seconds * 10) / 10;
}

function unref(timer: ReturnType<typeof setTimeout>): void {
  (timer as { unref?: () => void }).unref?.();
}
