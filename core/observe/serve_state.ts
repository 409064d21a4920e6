/**
 * The state a serving process publishes for the dashboard (`<pid>.json` under the activity folder): who
 * it is, its client sessions and their sandboxes, its upstream servers and their tools, its effective
 * policy, its metrics, the approval questions open right now and the artifact sessions still alive. New
 * capabilities add sections of their own as optional members; the dashboard shows the sections it knows.
 * `liveServeStates()` reads them back for a command that is not a dashboard (`codemode servers`).
 * @module
 */
import { readdir } from "node:fs/promises";
import type { MetricObjectWithValues, MetricValue } from "prom-client";
import { processAlive } from "../process_alive.ts";
import { activityDir, activityFiles } from "./activity_file.ts";
import { readPrivateFile } from "./private_files.ts";
import type { Isolation } from "../contracts/runtime.ts";

/** One client session and its sandbox. */
export interface SessionInfo {
  /** The client session's key (an HTTP session id, "stdio", ...). */
  key: string;
  state: "starting" | "idle" | "running";
  /** The sandbox (container) name, once it started. */
  sandbox?: string;
  runtime?: string;
  /** What isolates the sandbox from the host: container, gvisor (runsc) or wasm (Pyodide). */
  isolation?: Isolation;
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
  /** Its first tools (at most 200), for the dashboard's list; `toolCount` counts them all. */
  tools: { name: string; description?: string; addedAt?: string }[];
  toolCount?: number;
  /** Tools of its listing left out under codemode's caps (or kept with a caveat), and why. */
  problems?: { tool: string; problem: string; leftOut: boolean }[];
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
  /** "call" when absent; "add_server" for a server sandbox code wants to add; "plan" for runtime.plan. */
  kind?: string;
  server: string;
  tool: string;
  /** The arguments as the question shows them: clipped, configured secrets redacted. */
  summary: string;
  reason: string;
  /** Kinds other than a call: what the question says (e.g. the command an added server runs). */
  text?: string;
  /** The scopes the person may choose, the first being the default (absent: approve or decline only). */
  scopes?: { value: string; title: string }[];
  /** Values the question asks for (names only); one that is required can be given in the client only. */
  fields?: { name: string; required: boolean }[];
  askedAt: string;
  expiresAt: string;
  /** Whether the MCP client was asked too; false when only the dashboard can answer. */
  client: boolean;
  /** Set for a plan's question (runtime.plan): its description and how many calls `summary` lists. */
  plan?: { description: string; calls: number };
}

/** A server a client session added from a registry. */
export interface AddedServerInfo {
  session: string;
  alias: string;
  /** Its registry name and version, and the registry's host. */
  name: string;
  version: string;
  registry: string;
  /** What runs: the command line or the URL (values of secrets never appear). */
  runs: string;
  addedAt: string;
  /** The config file it was kept in, when the user chose to keep it. */
  kept?: string;
  state: string;
  tools: number;
}

/** Everything one serve publishes about itself. */
export interface ServeState {
  pid: number;
  version: string;
  transport: "stdio" | "http";
  /** The MCP endpoint of an HTTP serve. */
  url?: string;
  /** The fleet node id of an HTTP serve (CODEMODE_NODE_ID). */
  node?: string;
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
  /** Servers client sessions added from a registry. */
  added?: AddedServerInfo[];
  /** The ids of the artifact sessions still alive (their files can be downloaded). */
  artifactSessions?: string[];
}

/** What the serves running now publish under `stateDir`; unreadable or foreign files are skipped. */
export async function liveServeStates(stateDir: string): Promise<ServeState[]> {
  const names = await readdir(activityDir(stateDir)).catch(() => [] as string[]);
  const pids = names.flatMap((name) => /^(\d+)\.json$/.exec(name)?.[1] ?? []).map(Number).filter(
    processAlive,
  );
  const states = await Promise.all(
    pids.sort((a, b) => a - b).map(async (pid) => {
      try {
        return JSON.parse(
          new TextDecoder().decode(await readPrivateFile(activityFiles(stateDir, pid).state)),
        );
      } catch {
        return undefined;
      }
    }),
  );
  return states.filter((s): s is ServeState => typeof s?.pid === "number");
}
