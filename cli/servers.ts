/**
 * `codemode servers [--json]`: every configured server with its transport, the file it came from (a
 * server kept from a registry says which entry), its state (tools cached, skipped and why), whether a
 * remote one needs a login (probed with one request each, in parallel), the diagnostics of the config
 * files, and the servers that client sessions of running serves added from a registry.
 * @module
 */
import { cliConfig } from "./_config.ts";
import { colors, mark, printJson, table } from "./_render.ts";
import { escapeDeep } from "./_terminal_guard.ts";
import { ToolCatalog } from "../core/catalog/catalog.ts";
import type { ServerSpec } from "../core/contracts/discovery.ts";
import { OAuthClients } from "../core/auth/clients.ts";
import { loginCommand } from "../core/auth/needs_login.ts";
import { type AuthProbe, probeAuth } from "../core/auth/probe.ts";
import type { KeptServer } from "../core/config/kept_servers.ts";
import { type AddedServerInfo, liveServeStates } from "../core/observe/serve_state.ts";

/** Runs `codemode servers`; exit 1 when a config file has an error. */
export async function servers(opts: { json?: boolean }): Promise<number> {
  const config = await cliConfig();
  const { discovery } = config;
  // Reading the cache only: listing servers never starts one.
  const catalog = new ToolCatalog(discovery.servers, () => Promise.reject(new Error("not indexed yet")), {
    stateDir: config.settings.stateDir,
  });
  await catalog.start();
  const statuses = catalog.status().filter((s) => s.state === "cached");
  const cached = new Map(statuses.map((s) => [s.server, s.tools]));
  const problems = new Map(statuses.map((s) => [s.server, s.problems]));
  const refusal = (name: string) => {
    const verdict = config.policy.allowsServer(name);
    return verdict.ok ? undefined : verdict.reason;
  };
  const logins = await probeRemote(
    discovery.servers.filter((s) => !refusal(s.name)),
    new OAuthClients(config.settings.stateDir, config.settings.oauthDir),
  );
  const added: (AddedServerInfo & { pid: number })[] = (await liveServeStates(config.settings.stateDir))
    .flatMap((state) => (state.added ?? []).map((a) => ({ ...a, pid: state.pid })));
  const rows = discovery.servers.map((s) => ({
    name: s.name,
    transport: s.transport,
    source: { plugin: s.source.plugin, file: s.source.file, key: s.source.key, scope: s.source.scope },
    ...((s as KeptServer).registry ? { registry: (s as KeptServer).registry } : {}),
    state: refusal(s.name) ? "refused" : cached.has(s.name) ? "indexed" : "configured",
    ...(refusal(s.name) ? { refused: refusal(s.name) } : {}),
    ...(logins.has(s.name) ? { auth: logins.get(s.name)!.auth } : {}),
    ...(logins.get(s.name)?.problem ? { authProblem: logins.get(s.name)!.problem } : {}),
    tools: cached.get(s.name),
    ...(problems.get(s.name)?.length ? { toolProblems: problems.get(s.name) } : {}),
    shadowed: (s.shadowed ?? []).map((p) => p.file),
  }));
  const errors = discovery.diagnostics.filter((d) => d.severity === "error");
  if (opts.json) {
    printJson({
      servers: rows,
      added,
      skipped: discovery.skipped,
      diagnostics: discovery.diagnostics,
      files: discovery.files,
    });
    return errors.length ? 1 : 0;
  }
  const c = colors();
  const out: string[] = [];
  // Names, files, reasons and diagnostics come from config files and servers: escaped before they show.
  const shown = escapeDeep({ rows, added, skipped: discovery.skipped, diagnostics: discovery.diagnostics });
  if (rows.length) {
    out.push(table(
      ["", "server", "transport", "state", "source"],
      [
        ...shown.rows.map((r) => [
          mark(r.refused || r.auth === "needs-login" ? "warn" : "ok", c),
          r.name,
          r.transport,
          r.refused
            ? "refused by policy"
            : r.auth === "needs-login"
            ? `needs a login: ${loginCommand(r.name)}`
            : (r.tools === undefined ? r.state : `${r.tools} tools`) +
              (r.toolProblems?.some((p) => p.leftOut)
                ? `, ${r.toolProblems.filter((p) => p.leftOut).length} left out`
                : "") +
              (r.auth === "logged-in" ? ", logged in" : "") + (r.authProblem ? `; ${r.authProblem}` : ""),
          `${r.source.plugin}: ${r.source.file}` +
          (r.registry ? ` (kept from the registry: ${r.registry.name} ${r.registry.version})` : ""),
        ]),
        ...shown.skipped.map((
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
  if (shown.added.length) {
    out.push("", "Added from a registry by sessions of running serves (until their session ends):");
    out.push(table(
      ["", "server", "entry", "state", "runs", "serve / session"],
      shown.added.map((a) => [
        mark(a.state === "failed" ? "warn" : "ok", c),
        `mcp_${a.alias}`,
        `${a.name} ${a.version} (${a.registry})` + (a.kept ? `, kept in ${a.kept}` : ""),
        `${a.state}, ${a.tools} tools`,
        a.runs,
        `${a.pid} / ${a.session.slice(a.session.indexOf(".") + 1, a.session.indexOf(".") + 13)}`,
      ]),
      c,
    ));
  }
  for (const r of shown.rows) {
    for (const p of r.toolProblems ?? []) {
      out.push(`${mark("warn", c)} ${r.name}: tool ${p.tool}: ${p.problem}${p.leftOut ? " (left out)" : ""}`);
    }
  }
  for (const d of shown.diagnostics) {
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
