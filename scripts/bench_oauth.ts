/**
 * Section "oauth": what OAuth costs a proxied call. One local OAuth-protected MCP server
 * (tests/testdata/servers/oauth_server.ts), two entries in one upstream pool: "oauth", logged in with
 * `codemode auth login`'s flow and using the transport's auth provider, and "static", the same server with
 * a valid token in a static Authorization header (what codemode did before OAuth, the baseline). Calls
 * alternate in blocks so both see the same machine load. Also: the call that refreshes after a 401, and
 * how fast a server that needs a login refuses (no network).
 * @module
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServerSpec } from "../core/contracts/discovery.ts";
import { OAuthClients } from "../core/auth/clients.ts";
import { login } from "../core/auth/login.ts";
import { UpstreamPool } from "../core/upstream/pool.ts";
import { startOAuthServer } from "../tests/testdata/servers/oauth_server.ts";
import { percentile, row, type SectionResult } from "./bench_harness.ts";

const CALLS = Number(process.env.CODEMODE_BENCH_OAUTH_CALLS ?? 1000);
const BLOCK = 50;

async function approve(url: URL): Promise<void> {
  const page = await (await fetch(url)).text();
  const href = /id="approve" href="([^"]+)"/.exec(page)![1];
  await (await fetch(new URL(href, url))).body?.cancel();
}

/** Runs the oauth section. */
export async function benchOAuth(): Promise<SectionResult> {
  const result: SectionResult = { name: "oauth", rows: [], notes: [] };
  const server = await startOAuthServer();
  const stateDir = mkdtempSync(join(tmpdir(), "codemode-bench-oauth-"));
  const source = { plugin: "bench", file: "", key: "" };
  const oauthSpec: ServerSpec = { name: "oauth", transport: "http", url: server.mcpUrl, source };
  const specs: ServerSpec[] = [
    oauthSpec,
    {
      name: "static",
      transport: "http",
      url: server.mcpUrl,
      headers: { Authorization: `Bearer ${server.mint(server.mcpUrl)}` },
      source,
    },
    { name: "nologin", transport: "http", url: server.otherUrl, source },
  ];
  const clients = new OAuthClients(stateDir);
  const pool = new UpstreamPool(specs, { auth: (spec) => clients.forServer(spec) });
  try {
    await login(oauthSpec, { store: clients.store, authorize: approve });
    const call = async (name: string) => {
      const started = performance.now();
      await pool.callTool(name, "echo", { message: "x" });
      return performance.now() - started;
    };
    for (let i = 0; i < 50; i++) await Promise.all([call("oauth"), call("static")]);
    const times: Record<string, number[]> = { oauth: [], static: [] };
    for (let done = 0; done < CALLS; done += BLOCK) {
      for (const name of done % (2 * BLOCK) ? ["static", "oauth"] : ["oauth", "static"]) {
        for (let i = 0; i < BLOCK; i++) times[name].push(await call(name));
      }
    }
    const p50 = (name: string) => percentile(times[name], 0.5);
    result.rows.push(row({
      section: "oauth",
      metric: `proxied echo through the OAuth provider, p50 of ${CALLS}`,
      value: p50("oauth"),
      unit: "ms",
      baseline: { label: "same server, static Authorization header", value: p50("static") },
      goal: { on: "ratio", op: "≤", limit: 1.1 },
    }));
    result.rows.push(row({
      section: "oauth",
      metric: "  p95",
      value: percentile(times.oauth, 0.95),
      unit: "ms",
      baseline: { label: "static header p95", value: percentile(times.static, 0.95) },
    }));

    const refreshes: number[] = [];
    for (let i = 0; i < 20; i++) {
      server.revokeAccessTokens();
      refreshes.push(await call("oauth"));
    }
    result.rows.push(row({
      section: "oauth",
      metric: "call that meets a 401, refreshes and retries, p50 of 20",
      value: percentile(refreshes, 0.5),
      unit: "ms",
      baseline: { label: "plain call p50", value: p50("oauth") },
    }));

    await pool.listTools("nologin").catch(() => {});
    const refusals: number[] = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      await pool.callTool("nologin", "echo", { message: "x" }).catch(() => {});
      refusals.push(performance.now() - started);
    }
    result.rows.push(row({
      section: "oauth",
      metric: "call to a server that needs a login, refused (p50 of 200)",
      value: percentile(refusals, 0.5),
      unit: "ms",
      goal: { on: "value", op: "<", limit: 5 },
    }));
    result.notes.push(
      `oauth: ${server.counts.refreshes} refreshes, ${server.counts.mcpRequests} requests to the resource server; ` +
        `the needs-login refusals sent none after the first`,
    );
  } finally {
    await pool.close();
    await server.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
  return result;
}
