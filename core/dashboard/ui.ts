/**
 * `codemode ui`'s server: the dashboard of every serve running under this state dir, on a loopback
 * address only, behind a one-time login code. Its `/metrics` adds up the codemode metrics every serve
 * publishes (prom-client's aggregator, the one it offers for cluster workers) and shows its own process
 * metrics; its `/healthz` counts their sessions and servers.
 * @module
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  AggregatorRegistry,
  collectDefaultMetrics,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from "prom-client";
import type { SearchHit } from "../catalog/index.ts";
import { allowedHostsFor } from "../serve/http_guard.ts";
import { log } from "../observe/log.ts";
import { WatchMarker } from "../observe/watchers.ts";
import { DashboardAuth } from "./auth.ts";
import { LiveServes } from "./live_serves.ts";
import { Dashboard, type HealthBody } from "./server.ts";
import type { SkillsView } from "./skills.ts";

/** The address `codemode ui` listens on: loopback, never anything else. */
export const UI_HOST = "127.0.0.1";

/** What `codemode ui` is started with. */
export interface UiOptions {
  stateDir: string;
  /** Port; 0 picks a free one. */
  port: number;
  version: string;
  search(query: string, limit: number): SearchHit[] | Promise<SearchHit[]>;
  /** The skills panel's data, as `codemode skills list` reads it. */
  skills?(): Promise<SkillsView>;
  /** Also accept this bearer token (for scripts and scrapers); the login code works either way. */
  token?: string;
  /** Milliseconds between reads of the serves' files while a page is open. */
  intervalMs?: number;
}

/** A running `codemode ui`. */
export interface UiServer {
  /** The dashboard's address. */
  url: string;
  /** The one-time login URL to open (print it once; it stops working when used). */
  loginUrl: string;
  close(): Promise<void>;
}

/** Starts the dashboard server; rejects with a clear message when the port is taken. */
export async function startUi(options: UiOptions): Promise<UiServer> {
  const serves = new LiveServes(options.stateDir, { intervalMs: options.intervalMs });
  const started = Date.now();
  const own = new Registry();
  collectDefaultMetrics({ register: own });
  // Cookies are shared by every port of a host: a name of its own, so two dashboards never clash.
  const auth = new DashboardAuth({
    loginCode: true,
    token: options.token,
    cookieName: `codemode_ui_${randomBytes(6).toString("hex")}`,
  });
  const dashboard = new Dashboard({
    mode: "ui",
    version: options.version,
    auth,
    allowedHosts: allowedHostsFor(UI_HOST),
    serves,
    health: async () => {
      await serves.refresh();
      const views = serves.serves();
      const runtimes = [...new Set(views.map((s) => s.state.runtime).filter(Boolean))];
      return {
        status: "ok",
        version: options.version,
        uptimeSeconds: Math.round((Date.now() - started) / 100) / 10,
        runtime: runtimes.length ? runtimes.join(", ") : null,
        sessions: views.reduce((n, s) => n + s.state.sessions.length, 0),
        serversUp: views.reduce((n, s) => n + s.state.servers.filter((x) => x.state === "ready").length, 0),
        serves: views.length,
      } satisfies HealthBody & { serves: number };
    },
    metrics: async () => {
      await serves.refresh();
      const published = serves.serves().map((s) => s.state.metrics ?? []) as MetricObjectWithValues<
        MetricValue<string>
      >[][];
      return await Registry.merge([AggregatorRegistry.aggregate(published), own]).metrics();
    },
    search: options.search,
    ...(options.skills ? { skills: options.skills } : {}),
    watch: new WatchMarker(options.stateDir),
  });
  const http: Server = createServer((req, res) => {
    dashboard.handle(req, res).catch((error) => {
      log.error("dashboard request failed", { error: String(error) });
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "Internal error" }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "EADDRINUSE"
          ? new Error(`Port ${options.port} is in use: pass another --port, or --port 0 to pick a free one`)
          : new Error(`Cannot listen on ${UI_HOST}:${options.port}: ${error.message}`),
      ));
    http.listen(options.port, UI_HOST, () => resolve());
  });
  const port = (http.address() as AddressInfo).port;
  const url = `http://${UI_HOST}:${port}/`;
  return {
    url,
    loginUrl: `${url}?login=${auth.loginCode}`,
    async close() {
      await dashboard.close();
      const closed = new Promise<void>((resolve) => http.close(() => resolve()));
      (http as { closeAllConnections?: () => void }).closeAllConnections?.();
      await closed;
    },
  };
}
