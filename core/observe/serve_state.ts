/**
 * The state a serving process publishes for the dashboard (`<pid>.json` under the activity folder): who
 * it is, its client sessions and their sandboxes, its upstream servers and their tools, its effective
 * policy, its metrics, the approval questions open right now and the artifact sessions still alive. New
 * capabilities add sections of their own as optional members; the dashboard shows the sections it knows.
 * @module
 */
import type { MetricObjectWithValues, MetricValue } from "prom-client";

/** One client session and its sandbox. */
export interface SessionInfo {
  /** The client session's key (an HTTP session id, "stdio", ...). */
  key: string;
  state: "starting" | "idle" | "running";
  /** The sandbox (container) name, once it started. */
  sandbox?: string;
  runtime?: string;
  python?: string;
  startedAt?: string;
  lastUsedAt: string;
  runs: number;
  /** Background jobs of the session's sandbox (running, and the latest finished), oldest first. */
  jobs?: JobInfo[];
}

/** A background job's state: "running" until the sandbox says it ended (or the host gave up on it). */
export type JobState = "running" | "done" | "failed" | "cancelled";

/** One background job of a sandbox session (core/host_api/jobs.ts keeps them). */
export interface JobInfo {
  id: string;
  name: string;
  /** "job" (runtime.start_job) or "task" (an asyncio task a run left running). */
  kind: "job" | "task";
  state: JobState;
  startedAt: string;
  endedAt?: string;
  seconds: number;
  /** Tool calls the job made (counted by the host). */
  toolCalls: number;
  error?: string;
  /** The latest output it printed (a bounded tail). */
  output: string;
  /** Set when the host cancelled it for running past CODEMODE_MAX_JOB_TIME. */
  overtime?: boolean;
}

/** One upstream MCP server: where it is in its lifecycle, and its tools as far as they are known. */
export interface ServerInfo {
  name: string;
  transport: string;
  /** idle (not started yet), starting, ready, failed or closed. */
  state: string;
  error?: string;
  restarts: number;
  /** Where listing its tools for search stands: pending, cached, indexing, ready, failed. */
  index?: string;
  tools: { name: string; description?: string }[];
}

/** The MCP client connected on one session, as it introduced itself. */
export interface ClientInfo {
  session: string;
  name: string;
  version?: string;
}

/** The effective policy: its rules, where each was set, and whether it refuses anything at all. */
export interface PolicyInfo {
  open: boolean;
  rules: Record<string, unknown>;
  sources: Record<string, string>;
}

/** An approval question waiting for a person: the dashboard shows it with Approve and Decline. */
export interface PendingApprovalInfo {
  /** What the dashboard answers by. */
  id: string;
  /** The client session whose code made the call. */
  session: string;
  /** The run (request id) whose call waits. */
  requestId?: string;
  server: string;
  tool: string;
  /** The arguments as the question shows them: clipped, configured secrets redacted. */
  summary: string;
  reason: string;
  askedAt: string;
  expiresAt: string;
  /** Whether the MCP client was asked too; false when only the dashboard can answer. */
  client: boolean;
}

/** Everything one serve publishes about itself. */
export interface ServeState {
  pid: number;
  version: string;
  transport: "stdio" | "http";
  /** The MCP endpoint of an HTTP serve. */
  url?: string;
  startedAt: string;
  /** The working directory (which project a client started it in). */
  cwd: string;
  /** The sandbox runtime in use, once one was selected. */
  runtime?: string;
  clients: ClientInfo[];
  sessions: SessionInfo[];
  servers: ServerInfo[];
  policy: PolicyInfo;
  /** The codemode_* metrics in prom-client's JSON form, for `codemode ui` to aggregate. */
  metrics: MetricObjectWithValues<MetricValue<string>>[];
  /** Approval questions open now, oldest first. */
  approvals?: PendingApprovalInfo[];
  /** The ids of the artifact sessions still alive (their files can be downloaded). */
  artifactSessions?: string[];
}
