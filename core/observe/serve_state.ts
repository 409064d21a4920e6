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
  /** Set for a plan's question (runtime.plan): its description and how many calls `summary` lists. */
  plan?: { description: string; calls: number };
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
