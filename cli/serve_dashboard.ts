/**
 * The dashboard, `/healthz` and `/metrics` of `serve --http`, wired to the running codemode: its health
 * (runtime, sessions, servers up), its search (the catalog under the policy), its token.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Codemode } from "../mod.ts";
import { serveDashboard } from "../core/dashboard/for_serve.ts";
import { policySearch } from "../core/dashboard/search.ts";
import type { Dashboard } from "../core/dashboard/server.ts";
import { VERSION } from "../core/version.ts";

/** Routes for McpHttpServer: the dashboard once `attach()` has run (before it, 503). */
export function dashboardRoutes(app: Codemode): {
  routes(req: IncomingMessage, res: ServerResponse): Promise<void>;
  attach(options: { port: number; token?: string; allowedHosts?: readonly string[] }): void;
  close(): void;
} {
  let dashboard: Dashboard | undefined;
  return {
    async routes(req, res) {
      if (dashboard) return await dashboard.handle(req, res);
      res.writeHead(503, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "The server is starting" }));
    },
    attach({ port, token, allowedHosts }) {
      dashboard = serveDashboard({
        stateDir: app.settings.stateDir,
        version: VERSION,
        token,
        port,
        allowedHosts,
        health: () => ({
          status: "ok",
          version: VERSION,
          uptimeSeconds: Math.round(process.uptime() * 10) / 10,
          runtime: app.runtimeInUse ?? null,
          sessions: app.sessions.size,
          serversUp: app.servers.filter((s) => app.pool.status(s.name).state === "ready").length,
        }),
        search: policySearch(app.catalog, app.policy),
      });
    },
    close: () => dashboard?.close(),
  };
}
