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
import { type RuntimeChoice, selectRuntime } from "./sandbox/runtime_select.ts";
import { DetectionCache } from "./sandbox/detection_cache.ts";
import { capabilityText } from "./serve/capabilities.ts";
import { type Policy, policyOf } from "./config/policy.ts";
import { log } from "./observe/log.ts";
import { StatsPublisher } from "./observe/stats_file.ts";

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
  /** Each runtime's detection verdict, kept in the state directory between starts. */
  readonly detections: DetectionCache;
  #options: CodemodeOptions;
  #choice?: Promise<RuntimeChoice>;
  #stats?: StatsPublisher;

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
    this.detections = new DetectionCache(s.stateDir, options.version);
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
      onStartFailure: (runtime, error) => this.#startFailed(runtime, error),
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

  /**
   * The sandbox runtime, selected once (lazily: detection runs commands), from cached verdicts where
   * they still hold.
   */
  runtime(): Promise<RuntimePlugin> {
    this.#choice ??= selectRuntime(this.settings.runtime, this.#options.plugins.runtimes(), this.detections);
    this.#choice.catch(() => (this.#choice = undefined));
    return this.#choice.then((choice) => choice.runtime);
  }

  /**
   * A sandbox of `runtime` did not start: its cached verdict is dropped and the runtime is selected
   * afresh at the next start. Tells the session manager to try once more when the failed choice rested
   * on a cached verdict (the fresh one may pick another runtime, or prove the first still works).
   */
  async #startFailed(runtime: RuntimePlugin, error: unknown): Promise<boolean> {
    const choice = await this.#choice?.catch(() => undefined);
    await this.detections.drop(runtime.name);
    const current = choice?.runtime === runtime;
    if (current) this.#choice = undefined;
    log.info("a sandbox did not start: dropped its runtime's cached verdict", {
      runtime: runtime.name,
      cached: Boolean(current && choice.cached),
      error: String(error),
    });
    return Boolean(current && choice.cached);
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
   * An MCP server for one client connection. A serving codemode publishes its stats for `codemode stats`.
   * The server side of the MCP SDK loads here, on first use: `run`, `search` and `doctor` never serve.
   * Its sandbox is prewarmed when the client initializes, as CODEMODE_PREWARM says for `transport`.
   */
  async mcpServer(sessionKey: string, transport: "stdio" | "http" = "stdio"): Promise<McpServer> {
    const { createMcpServer } = await import("./serve/mcp_server.ts");
    const prewarm = this.settings.prewarm === "on" ||
      (this.settings.prewarm === "stdio" && transport === "stdio");
    if (!this.#stats) {
      this.#stats = new StatsPublisher(this.settings.stateDir);
      this.#stats.start();
    }
    return createMcpServer({
      runner: this.sessions,
      output: this.#options.plugins.output(this.settings.output),
      defaultTimeout: this.settings.timeout,
      maxTimeout: this.settings.maxTimeout,
      capabilities: () => capabilityText(this.servers, this.#runtimeName(), this.policy),
      preload: (names) => this.preload(names),
      sessionKey,
      version: this.#options.version,
      ...(prewarm ? { onInitialized: () => this.sessions.prewarm(sessionKey) } : {}),
    });
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
