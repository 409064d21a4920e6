/**
 * The composition root of a codemode process: settings and plugins in; discovery, the upstream pool,
 * the tool catalog, the sandbox sessions and MCP servers out. Plugins are injected, never imported.
 * @module
 */
import type { McpServer } from "@modelcontextprotocol/server";
import type { Diagnostic, DiscoveryContext, ServerSpec } from "./contracts/discovery.ts";
import type { RuntimePlugin } from "./contracts/runtime.ts";
import type { BootstrapConfig, HostFrame } from "./sandbox/protocol.ts";
import { pythonAlias } from "./python_alias.ts";
import type { Settings } from "./config/settings.ts";
import type { PluginRegistry } from "./registry.ts";
import { defaultDiscoveryContext, discoverServers, type Discovery } from "./config/discovery.ts";
import { UpstreamPool } from "./upstream/pool.ts";
import { ToolCatalog } from "./catalog/catalog.ts";
import { encodeRawResult, unwrapToolResult } from "./sandbox/tool_result.ts";
import { sandboxApi } from "./sandbox/api.ts";
import { SessionManager } from "./sandbox/session_manager.ts";
import { selectRuntime } from "./sandbox/runtime_select.ts";
import { capabilityText } from "./serve/capabilities.ts";
import { type Policy, policyOf } from "./config/policy.ts";
import { log } from "./observe/log.ts";
import { StatsPublisher } from "./observe/stats_file.ts";
import { stats } from "./observe/stats.ts";
import { ActivityPublisher } from "./observe/activity_file.ts";
import type { ServeState } from "./observe/serve_state.ts";

/** The Python that runs in the sandbox: the bootstrap command and its first frame. */
export interface SandboxSource {
  command: string[];
  bootstrapFrame(config: BootstrapConfig): HostFrame;
}

/** What a codemode process is built from. */
export interface CodemodeOptions {
  settings: Settings;
  plugins: PluginRegistry;
  sandbox: SandboxSource;
  version: string;
  discoveryContext?: DiscoveryContext;
  /** Server specs to use instead of discovering them (tests, embedding). */
  servers?: ServerSpec[];
  /** Start indexing every server's tools in the background (serve does; one-shot commands don't). */
  indexInBackground?: boolean;
}

/** A running codemode: its servers, pool, catalog and sandbox sessions. */
export class Codemode {
  readonly settings: Settings;
  /** The servers sandbox code may use: discovered ones the policy allows. */
  readonly servers: ServerSpec[];
  readonly policy: Policy;
  readonly discovery: Discovery;
  readonly pool: UpstreamPool;
  readonly catalog: ToolCatalog;
  readonly sessions: SessionManager;
  #options: CodemodeOptions;
  #runtime?: Promise<RuntimePlugin>;
  #runtimeInUse?: string;
  #stats?: StatsPublisher;
  #activity?: ActivityPublisher;
  /** The MCP server of each client session, for the clients' names in the published state. */
  #clients = new Map<string, McpServer>();
  #serving: { transport: "stdio" | "http"; url?: string; startedAt: Date } | undefined;

  private constructor(options: CodemodeOptions, discovery: Discovery) {
    this.#options = options;
    this.settings = options.settings;
    this.discovery = discovery;
    this.policy = policyOf(this.settings);
    // Refused servers get no proxy, no index entry and no process: nothing starts them.
    this.servers = discovery.servers.filter((spec) => {
      const verdict = this.policy.allowsServer(spec.name);
      if (!verdict.ok) log.info("server refused by policy", { server: spec.name, reason: verdict.reason });
      return verdict.ok;
    });
    this.pool = new UpstreamPool(this.servers);
    this.catalog = new ToolCatalog(this.servers, (spec) => this.pool.listTools(spec.name), {
      stateDir: this.settings.stateDir,
    });
    const s = this.settings;
    this.sessions = new SessionManager({
      runtime: () => this.runtime(),
      image: s.image,
      limits: { memory: s.memory, pids: s.pids, cpus: s.cpus },
      command: options.sandbox.command,
      bootstrap: () => options.sandbox.bootstrapFrame(this.bootstrapConfig()),
      rpc: sandboxApi(
        this.pool,
        this.catalog,
        { unwrap: unwrapToolResult, raw: encodeRawResult },
        this.policy,
      ),
      maxOutput: s.maxOutput,
      idleTimeout: s.idleTimeout,
      maxSessions: s.maxSessions,
      maxRuns: s.maxRuns,
    });
  }

  /** Discovers servers and builds a codemode; nothing is started yet. */
  static async create(options: CodemodeOptions): Promise<Codemode> {
    const discovery: Discovery = options.servers
      ? { servers: options.servers, skipped: [], diagnostics: [], files: [] }
      : await discoverServers(
        options.discoveryContext ?? defaultDiscoveryContext(),
        options.plugins.discoveryPlugins(),
        { allowSelf: options.settings.allowSelf },
      );
    for (const d of discovery.diagnostics) logDiagnostic(d);
    const app = new Codemode(options, discovery);
    if (options.indexInBackground) app.catalog.start();
    return app;
  }

  /** The sandbox runtime, selected once (lazily: detection runs commands). */
  runtime(): Promise<RuntimePlugin> {
    this.#runtime ??= selectRuntime(this.settings.runtime, this.#options.plugins.runtimes()).then((r) => {
      this.#runtimeInUse = r.name;
      return r;
    });
    this.#runtime.catch(() => (this.#runtime = undefined));
    return this.#runtime;
  }

  /** The name of the sandbox runtime once one was selected. */
  get runtimeInUse(): string | undefined {
    return this.#runtimeInUse;
  }

  /** What the sandbox is told at start-up. */
  bootstrapConfig(): BootstrapConfig {
    return {
      max_output: this.settings.maxOutput,
      servers: this.servers.map((s) => ({
        name: s.name,
        alias: pythonAlias(s.name),
        ...(s.description ? { description: s.description } : {}),
      })),
    };
  }

  /**
   * An MCP server for one client connection. A serving codemode publishes its stats for `codemode stats`
   * and its activity for `codemode ui` (unless CODEMODE_ACTIVITY=0). The server side of the MCP SDK loads
   * here, on first use: `run`, `search` and `doctor` never serve.
   */
  async mcpServer(sessionKey: string): Promise<McpServer> {
    const { createMcpServer } = await import("./serve/mcp_server.ts");
    this.serving({ transport: sessionKey === "stdio" ? "stdio" : "http" });
    const server = createMcpServer({
      runner: this.sessions,
      output: this.#options.plugins.output(this.settings.output),
      defaultTimeout: this.settings.timeout,
      maxTimeout: this.settings.maxTimeout,
      capabilities: () => capabilityText(this.servers, this.#runtimeName(), this.policy),
      preload: (names) => this.preload(names),
      sessionKey,
      version: this.#options.version,
    });
    this.#clients.set(sessionKey, server);
    const closed = server.server.onclose;
    server.server.onclose = () => {
      if (this.#clients.get(sessionKey) === server) this.#clients.delete(sessionKey);
      closed?.();
    };
    return server;
  }

  /** Starts publishing stats and activity as a serve of `transport` (at `url`, for HTTP); once per process. */
  serving(info: { transport: "stdio" | "http"; url?: string }): void {
    if (this.#serving) {
      if (info.url) this.#serving.url = info.url;
      return;
    }
    this.#serving = { ...info, startedAt: new Date() };
    this.#stats = new StatsPublisher(this.settings.stateDir);
    this.#stats.start();
    if (!this.settings.activity) return;
    this.#activity = new ActivityPublisher(this.settings.stateDir, {
      state: () => this.serveState(),
      maxBytes: this.settings.activityMax,
    });
    void this.#activity.start();
  }

  /** What this process publishes about itself for the dashboard. */
  async serveState(): Promise<ServeState> {
    const index = new Map(this.catalog.status().map((s) => [s.server, s.state]));
    return {
      pid: process.pid,
      version: this.#options.version,
      transport: this.#serving?.transport ?? "stdio",
      ...(this.#serving?.url ? { url: this.#serving.url } : {}),
      startedAt: (this.#serving?.startedAt ?? new Date()).toISOString(),
      cwd: process.cwd(),
      ...(this.#runtimeInUse ? { runtime: this.#runtimeInUse } : {}),
      clients: [...this.#clients].flatMap(([session, server]) => {
        const client = server.server.getClientVersion();
        return client ? [{ session, name: client.name, version: client.version }] : [];
      }),
      sessions: this.sessions.list(),
      servers: this.servers.map((spec) => {
        const status = this.pool.status(spec.name);
        return {
          name: spec.name,
          transport: status.transport ?? spec.transport,
          state: status.state,
          ...(status.error ? { error: status.error } : {}),
          restarts: status.restarts,
          ...(index.has(spec.name) ? { index: index.get(spec.name) } : {}),
          tools: this.catalog.docs(spec.name).map((d) => ({
            name: d.tool,
            ...(d.description ? { description: d.description.slice(0, 300) } : {}),
          })),
        };
      }),
      policy: {
        open: this.policy.open,
        rules: { ...this.policy.rules },
        sources: Object.fromEntries(
          Object.entries(this.policy.sources).filter((e): e is [string, string] => Boolean(e[1])),
        ),
      },
      metrics: await stats.metrics.codemodeJson(),
    };
  }

  /** Starts the named servers; returns why each name that cannot be started can't (unknown, refused). */
  async preload(names: string[]): Promise<string[]> {
    const known = new Map(this.servers.flatMap((s) => [[s.name, s.name], [pythonAlias(s.name), s.name]]));
    const problems = names.filter((n) => !known.has(n)).map((n) => {
      const verdict = this.policy.allowsServer(n);
      return verdict.ok ? `Unknown server "${n}"` : verdict.reason;
    });
    await Promise.all(
      names.filter((n) => known.has(n)).map((n) =>
        this.pool.listTools(known.get(n)!).catch((e) =>
          log.warn("preload failed", { server: n, error: String(e) })
        )
      ),
    );
    return problems;
  }

  /** Stops sandboxes and upstream servers. */
  async close(): Promise<void> {
    await Promise.allSettled([
      this.sessions.closeAll(),
      this.pool.close(),
      this.catalog.close?.(),
      this.#stats?.stop(),
      this.#activity?.stop(),
    ]);
  }

  #runtimeName(): string | undefined {
    return this.settings.runtime === "auto" ? undefined : this.settings.runtime;
  }
}

function logDiagnostic(d: Diagnostic): void {
  const fields = { file: d.file, server: d.server, message: d.message };
  if (d.severity === "error") log.warn("config problem", fields);
  else log.info("config note", fields);
}
