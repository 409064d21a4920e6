/**
 * The dashboard of `serve --http`, at `/` beside `/mcp`: the same page as `codemode ui`, showing this
 * process alone (read from the activity it publishes, like any serve's), with its own `/healthz` and its
 * `/metrics` (codemode's metrics and prom-client's default process metrics).
 * @module
 */
import { randomBytes } from "node:crypto";
import type { SearchHit } from "../catalog/index.ts";
import { stats } from "../observe/stats.ts";
import { WatchMarker } from "../observe/watchers.ts";
import { DashboardAuth } from "./auth.ts";
import { LiveServes } from "./live_serves.ts";
import { Dashboard, type HealthBody } from "./server.ts";
import type { SkillsView } from "./skills.ts";

/** What the serve's dashboard needs from the running codemode. */
export interface ServeDashboardOptions {
  stateDir: string;
  version: string;
  /** The bearer token of serve --http, if set. */
  token?: string;
  allowedHosts?: readonly string[];
  health(): HealthBody;
  search(query: string, limit: number): SearchHit[] | Promise<SearchHit[]>;
  /** The skills this serve loads. */
  skills?(): Promise<SkillsView>;
  /** Whether this serve publishes its activity (CODEMODE_ACTIVITY); the page has nothing to show if not. */
  publishing: boolean;
}

/** The dashboard of this serve --http process. */
export function serveDashboard(options: ServeDashboardOptions): Dashboard {
  void stats.metrics.enableProcessMetrics();
  return new Dashboard({
    mode: "serve",
    version: options.version,
    // Cookies are shared by every port of a host: a name of its own, so two dashboards never clash.
    auth: new DashboardAuth({
      token: options.token,
      cookieName: `codemode_serve_${randomBytes(6).toString("hex")}`,
    }),
    allowedHosts: options.allowedHosts,
    serves: new LiveServes(options.stateDir, { only: (pid) => pid === process.pid }),
    health: options.health,
    metrics: () => stats.metrics.text(),
    search: options.search,
    ...(options.skills ? { skills: options.skills } : {}),
    // An open page can answer this serve's approvals, also for clients that cannot be asked.
    ...(options.publishing ? { watch: new WatchMarker(options.stateDir, { only: process.pid }) } : {}),
    ...(options.publishing ? {} : {
      notice:
        "This serve does not publish its activity (CODEMODE_ACTIVITY=0), so there is nothing to show; " +
        "/healthz and /metrics still work.",
    }),
  });
}
