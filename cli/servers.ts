/**
 * `codemode servers [--json]`: every configured server with its transport, the file it came from, its
 * state (tools cached, skipped and why), whether a remote one needs a login (probed with one request
 * each, in parallel), and the diagnostics of the config files.
 * @module
 */
import { cliConfig } from "./_config.ts";
import { colors, mark, printJson, table } from "./_render.ts";
import { ToolCatalog } from "../core/catalog/catalog.ts";
import type { ServerSpec } from "../core/contracts/discovery.ts";
import { OAuthClients } from "../core/auth/clients.ts";
import { loginCommand } from "../core/auth/needs_login.ts";
import { type AuthProbe, probeAuth } from "../core/auth/probe.ts";

/** Runs `codemode servers`; exit 1 when a config file has an error. */
export async function servers(opts: { json?: boolean }): Promise<number> {
  const config = await cliConfig();
  const { discovery } = config;
  // Reading the cache only: listing servers never starts one.
  const catalog = new ToolCatalog(discovery.servers, () => Promise.reject(new Error("not indexed yet")), {
    stateDir: config.settings.stateDir,
  });
  await catalog.start();
  const cached = new Map(
    catalog.status().filter((s) => s.state === "cached").map((s) => [s.server, s.tools]),
  );
  const refusal = (name: string) => {
    const verdict = config.policy.allowsServer(name);
    return verdict.ok ? undefined : verdict.reason;
  };
  const logins = await probeRemote(
    discovery.servers.filter((s) => !refusal(s.name)),
    new OAuthClients(config.settings.stateDir, config.settings.oauthDir),
  );
  const rows = discovery.servers.map((s) => ({
    name: s.name,
    transport: s.transport,
    source: { plugin: s.source.plugin, file: s.source.file, key: s.source.key, scope: s.source.scope },
    state: refusal(s.name) ? "refused" : cached.has(s.name) ? "indexed" : "configured",
    ...(refusal(s.name) ? { refused: refusal(s.name) } : {}),
    ...(logins.has(s.name) ? { auth: logins.get(s.name)!.auth } : {}),
    ...(logins.get(s.name)?.problem ? { authProblem: logins.get(s.name)!.problem } : {}),
    tools: cached.get(s.name),
    shadowed: (s.shadowed ?? []).map((p) => p.file),
  }));
  const errors = discovery.diagnostics.filter((d) => d.severity === "error");
  if (opts.json) {
    printJson({
      servers: rows,
      skipped: discovery.skipped,
      diagnostics: discovery.diagnostics,
      files: discovery.files,
    });
    return errors.length ? 1 : 0;
  }
  const c = colors();
  const out: string[] = [];
  if (rows.length) {
    out.push(table(
      ["", "server", "transport", "state", "source"],
      [
        ...rows.map((r) => [
          mark(r.refused || r.auth === "needs-login" ? "warn" : "ok", c),
          r.name,
          r.transport,
          r.refused
            ? "refused by policy"
            : r.auth === "needs-login"
            ? `needs a login: ${loginCommand(r.name)}`
            : (r.tools === undefined ? r.state : `${r.tools} tools`) +
              (r.auth === "logged-in" ? ", logged in" : "") + (r.authProblem ? `; ${r.authProblem}` : ""),
          `${r.source.plugin}: ${r.source.file}`,
        ]),
        ...discovery.skipped.map((
          s,
        ) => [mark("warn", c), s.name, "-", `skipped: ${s.reason}`, s.source.file]),
      ],
      c,
    ));
  } else {
    out.push(
      "No MCP servers are configured. codemode reads the configs of Claude Desktop, Claude Code, VS Code,",
    );
    out.push("Cursor, Windsurf, Gemini CLI, Codex and ~/MCPs/*.json (see docs/discovery.md).");
  }
  for (const d of discovery.diagnostics) {
    out.push(
      `${mark(d.severity === "error" ? "fail" : "warn", c)} ${d.file}${
        d.server ? ` (${d.server})` : ""
      }: ${d.message}`,
    );
  }
  process.stdout.write(out.join("\n") + "\n");
  await config.close();
  return errors.length ? 1 : 0;
}

/** The login state of every remote server, each found out with one request, all at once. */
async function probeRemote(servers: ServerSpec[], oauth: OAuthClients): Promise<Map<string, AuthProbe>> {
  const remote = servers.filter((s) => s.transport !== "stdio" && s.url);
  const found = await Promise.all(
    remote.map(async (s) => [s.name, await probeAuth(s, oauth.forServer(s))] as const),
  );
  return new Map(found);
}
