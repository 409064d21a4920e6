/**
 * The dashboard, `/healthz` and `/metrics` of `serve --http`, wired to the running codemode: its health
 * (runtime, sessions, servers up), its search (the catalog under the policy, with its skills), its skills,
 * its token.
 * @module
 */
import type { Codemode } from "../mod.ts";
import { serveDashboard } from "../core/dashboard/for_serve.ts";
import { policySearch } from "../core/dashboard/search.ts";
import type { Dashboard } from "../core/dashboard/server.ts";
import { SkillsPanel } from "../core/dashboard/skills.ts";
import { VERSION } from "../core/version.ts";

/** The dashboard of `app` as `serve --http` serves it. */
export function dashboardFor(
  app: Codemode,
  options: { node: string; token?: string; allowedHosts?: readonly string[] },
): Dashboard {
  const skills = new SkillsPanel(() => app.skillStore(), app.settings.skills);
  return serveDashboard({
    stateDir: app.settings.stateDir,
    version: VERSION,
    token: options.token,
    allowedHosts: options.allowedHosts,
    health: () => ({
      status: "ok",
      node: options.node,
      version: VERSION,
      uptimeSeconds: Math.round(process.uptime() * 10) / 10,
      runtime: app.runtimeInUse ?? null,
      sessions: app.sessions.size,
      serversUp: app.servers.filter((s) => app.pool.status(s.name).state === "ready").length,
    }),
    search: policySearch(app.catalog, app.policy),
    skills: () => skills.view(),
    publishing: app.settings.activity,
  });
}
