/**
 * `codemode stats [--json]`: the counters and latencies of every `codemode serve` running on this machine
 * for this state dir (each publishes a snapshot file; files of processes that are gone are skipped and
 * removed). Tables on a terminal; `--json` prints the snapshots as an array for scripts.
 * @module
 */
import { loadSettings } from "../core/config/settings.ts";
import { checkStateStamp, readStateStamp } from "../core/config/state_stamp.ts";
import { VERSION } from "../core/version.ts";
import type { StatsSnapshot } from "../core/observe/stats.ts";
import { readLiveSnapshots } from "../core/observe/stats_file.ts";
import { colors, formatMs, printJson, table } from "./_render.ts";
import { escapeDeep } from "./_terminal_guard.ts";

/** Runs `codemode stats`; exit 0 even when no server runs (that is an answer, not a failure). */
export async function stats(opts: { json?: boolean }): Promise<number> {
  const settings = loadSettings();
  checkStateStamp(settings.stateDir, await readStateStamp(settings.stateDir), VERSION);
  const snapshots = await readLiveSnapshots(settings.stateDir);
  if (opts.json) {
    printJson(snapshots);
    return 0;
  }
  // Server and tool names in the snapshots are the servers' own: escaped before they are shown.
  process.stdout.write(renderStats(escapeDeep(snapshots)) + "\n");
  return 0;
}

/** The snapshots as tables: one row per process, then one row per upstream tool. */
export function renderStats(snapshots: StatsSnapshot[], now = new Date()): string {
  if (!snapshots.length) {
    return "No codemode serve is running (none publishes stats under this state dir).";
  }
  const c = colors();
  const out = [
    table(
      [
        "pid",
        "up",
        "runs",
        "ok",
        "error",
        "timeout",
        "cancelled",
        "run p50",
        "run p95",
        "sandboxes",
        "exits",
      ],
      snapshots.map((s) => [
        String(s.pid),
        uptime(now.getTime() - Date.parse(s.startedAt)),
        String(s.runs.total),
        String(s.runs.ok),
        String(s.runs.error),
        String(s.runs.timeout),
        String(s.runs.cancelled),
        formatMs(s.runs.latency.p50Ms),
        formatMs(s.runs.latency.p95Ms),
        `${s.sandboxes.live} live${isolations(s)} / ${s.sandboxes.launches} launched` +
        (s.sandboxes.launchFailures ? ` (${s.sandboxes.launchFailures} failed)` : ""),
        Object.entries(s.sandboxes.exits).map(([why, n]) => `${why} ${n}`).join(", ") || "-",
      ]),
      c,
    ),
  ];
  const several = snapshots.length > 1;
  const tools = snapshots.flatMap((s) =>
    s.upstream.flatMap((server) =>
      server.tools.map((t) => [
        ...(several ? [String(s.pid)] : []),
        server.server,
        t.tool,
        String(t.count),
        String(t.errors),
        String(t.toolErrors),
        formatMs(t.p50Ms),
        formatMs(t.p95Ms),
        formatMs(t.maxMs),
      ])
    )
  );
  if (tools.length) {
    const head = ["server", "tool", "calls", "failed", "isError", "p50", "p95", "max"];
    out.push("", table(several ? ["pid", ...head] : head, tools, c));
  } else {
    out.push("", "No upstream tool calls yet.");
  }
  const approvals = approvalLine(snapshots);
  if (approvals) out.push("", approvals);
  const jobs = jobLine(snapshots);
  if (jobs) out.push("", jobs);
  const registry = registryLine(snapshots);
  if (registry) out.push("", registry);
  const malformed = snapshots.reduce((n, s) => n + s.malformedFrames, 0);
  const rpcErrors = snapshots.reduce((n, s) => n + s.rpc.reduce((m, r) => m + r.errors, 0), 0);
  if (malformed || rpcErrors) {
    out.push("", `${rpcErrors} failed calls from sandboxes, ${malformed} malformed frames dropped`);
  }
  return out.join("\n");
}

/** Approval questions of every process together, or "" when none was asked or needed. */
function approvalLine(snapshots: StatsSnapshot[]): string {
  const sum = (key: keyof StatsSnapshot["approvals"]) =>
    snapshots.reduce((n, s) => n + (s.approvals?.[key] ?? 0), 0);
  const [asked, unavailable] = [sum("asked"), sum("unavailable")];
  if (!asked && !unavailable) return "";
  return `Approvals: ${asked} asked, ${sum("approved")} approved, ${sum("declined")} declined, ` +
    `${sum("timedOut")} timed out; ${unavailable} needed but the client could not be asked`;
}

/** Background jobs and MCP tasks of every process together, or "" when there were none. */
function jobLine(snapshots: StatsSnapshot[]): string {
  const jobs = (key: keyof StatsSnapshot["jobs"]) => snapshots.reduce((n, s) => n + (s.jobs?.[key] ?? 0), 0);
  const tasks = (key: keyof StatsSnapshot["tasks"]) =>
    snapshots.reduce((n, s) => n + (s.tasks?.[key] ?? 0), 0);
  const parts = [];
  if (jobs("started")) {
    parts.push(
      `Jobs: ${jobs("started")} started, ${jobs("running")} running, ${jobs("done")} done, ${
        jobs("failed")
      } ` +
        `failed, ${jobs("cancelled")} cancelled, ${jobs("overtime")} cancelled past CODEMODE_MAX_JOB_TIME`,
    );
  }
  const ended = tasks("completed") + tasks("failed") + tasks("cancelled");
  if (ended || tasks("working")) {
    parts.push(
      `MCP tasks: ${tasks("working")} working, ${tasks("completed")} completed, ${tasks("failed")} failed, ` +
        `${tasks("cancelled")} cancelled`,
    );
  }
  return parts.join("\n");
}

/** Registry searches and adds of every process together, or "" when there were none. */
export function registryLine(snapshots: StatsSnapshot[]): string {
  const finds = snapshots.reduce((n, s) => n + (s.registry?.finds ?? 0), 0);
  const errors = snapshots.reduce((n, s) => n + (s.registry?.findErrors ?? 0), 0);
  const sum = (key: "adds" | "refused") => {
    const all: Record<string, number> = {};
    for (const s of snapshots) {
      for (const [k, v] of Object.entries(s.registry?.[key] ?? {})) all[k] = (all[k] ?? 0) + v;
    }
    return all;
  };
  const [adds, refused] = [sum("adds"), sum("refused")];
  const list = (counts: Record<string, number>) =>
    Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(", ") || "none";
  if (!finds && !Object.keys(adds).length && !Object.keys(refused).length) return "";
  return `Registry: ${finds} finds${errors ? ` (${errors} failed)` : ""}; adds: ${list(adds)}; ` +
    `refused before asking: ${list(refused)}`;
}

function uptime(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${seconds % 60}s`;
  return `${Math.floor(minutes / 60)}h ${minutes % 60}m`;
}

/**
 * How the running sandboxes are isolated, e.g. " (gvisor 2)", when any is not a plain container; older
 * snapshots lack the list.
 */
function isolations(s: StatsSnapshot): string {
  const counts = new Map<string, number>();
  for (const sandbox of s.sandboxes.running ?? []) {
    counts.set(sandbox.isolation, (counts.get(sandbox.isolation) ?? 0) + 1);
  }
  if ([...counts.keys()].every((isolation) => isolation === "container")) return "";
  return ` (${[...counts].map(([isolation, n]) => `${isolation} ${n}`).join(", ")})`;
}
