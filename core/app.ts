/**
 * The composition root of a codemode process: settings and plugins in; discovery, the upstream pool,
 * the tool catalog, the sandbox sessions and MCP servers out. Plugins are injected, never imported.
 * @module
 */
import type { McpServer } from "@modelcontextprotocol/server";
import { hostname } from "node:os";
import type { Diagnostic, DiscoveryContext, ServerSpec } from "./contracts/discovery.ts";
import type { RuntimePlugin } from "./contracts/runtime.ts";
import type { BootstrapConfig, HostFrame } from "./sandbox/protocol.ts";
import { pythonAlias } from "./python_alias.ts";
import type { Settings } from "./config/settings.ts";
import { claimStateDir } from "./config/state_stamp.ts";
import type { PluginRegistry } from "./registry.ts";
import { defaultDiscoveryContext, discoverServers, type Discovery, ownServers } from "./config/discovery.ts";
import { UpstreamPool } from "./upstream/pool.ts";
import { OAuthClients } from "./auth/clients.ts";
import { ToolCatalog } from "./catalog/catalog.ts";
import { toolResultForPython } from "./host_api/tool_result.ts";
import { sandboxApi } from "./host_api/api.ts";
import { SessionManager } from "./sandbox/session_manager.ts";
import { type RuntimeChoice, selectRuntime } from "./sandbox/runtime_select.ts";
import { DetectionCache } from "./sandbox/detection_cache.ts";
import { capabilityText } from "./serve/capabilities.ts";
import { type Policy, policyOf } from "./config/policy.ts";
import { log } from "./observe/log.ts";
import { StatsPublisher } from "./observe/stats_file.ts";
import { ArtifactStores } from "./artifacts/stores.ts";
import type { ArtifactStore } from "./artifacts/store.ts";
import { ARTIFACTS_DIR, MAX_ARTIFACTS_PER_RUN } from "./sandbox/artifact_receiver.ts";
import type { SkillStore } from "./skills/store.ts";
import { skillRoots } from "./skills/sources.ts";
import { type ToolDoc, toolDoc } from "./catalog/docs.ts";
import { ApprovalBroker } from "./host_api/approvals.ts";
import { stats } from "./observe/stats.ts";
import { ActivityInbox, ActivityPublisher } from "./observe/activity_file.ts";
import { watched } from "./observe/watchers.ts";
import { bridgeApprovals, pendingApprovals } from "./serve/approval_activity.ts";
import type { ServeState } from "./observe/serve_state.ts";
import { AddedServers } from "./host_api/added_servers.ts";
import { type RegistrySide, registrySide } from "./host_api/registry_api.ts";
import { redact, secretsOf } from "./upstream/redact.ts";
import { ATTR, exportTarget, inSpan, startTracing, stopTracing } from "./observe/trace.ts";
import { resolveNodeId } from "./serve/node_id.ts";

/** Tools per server in the state a serve publishes for the dashboard (`toolCount` says how many there are). */
const STATE_TOOLS = 200;

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
  /** The working directory whose `.codemode/skills/` is the first skill directory (default: the process's). */
  cwd?: string;
  /** Export traces when an OTLP endpoint is set (serve and run do; commands that run no code don't). */
  tracing?: boolean;
  /**
   * Claim the state directory before anything reads it (default true): a directory a newer codemode
   * wrote is refused (NewerStateError). Doctor passes false and reports it instead.
   */
  claimStateDir?: boolean;
}

/** A running codemode: its servers, pool, catalog and sandbox sessions. */
export class Codemode {
  readonly settings: Settings;
  /** The servers sandbox code may use: discovered ones the policy allows. */
  readonly servers: ServerSpec[];
  readonly policy: Policy;
  readonly discovery: Discovery;
  readonly pool: UpstreamPool;
  /** OAuth credentials of the remote servers that log in. */
  readonly oauth: OAuthClients;
  readonly catalog: ToolCatalog;
  readonly sessions: SessionManager;
  /** Each session's artifacts, under the state dir. */
  readonly artifacts: ArtifactStores;
  #stores = new Map<string, ArtifactStore>();
  /** Questions to the user about calls that need approval: open ones can be listed and answered by id. */
  readonly approvals: ApprovalBroker;
  /** The MCP registry (undefined when CODEMODE_REGISTRY_URL=off), the add policy, and their host methods. */
  readonly registry: RegistrySide;
  /** The servers each session added from the registry. */
  readonly added: AddedServers;
  /** Each runtime's detection verdict, kept in the state directory between starts. */
  readonly detections: DetectionCache;
  #options: CodemodeOptions;
  #choice?: Promise<RuntimeChoice>;
  #skills?: Promise<SkillStore | undefined>;
  /** The store once loaded (the capabilities text is built synchronously). */
  #loadedSkills?: SkillStore;
  #runtimeInUse?: string;
  #stats?: StatsPublisher;
  #activity?: ActivityPublisher;
  #stopApprovals?: () => void;
  /** The MCP server of each client session, for the clients' names in the published state. */
  #clients = new Map<string, McpServer>();
  /** Counts an MCP server's working tasks (set once the server side has loaded). */
  #workingTasks: (server: McpServer) => number = () => 0;
  #serving: { transport: "stdio" | "http"; url?: string; node?: string; startedAt: Date } | undefined;

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
    this.oauth = new OAuthClients(this.settings.stateDir, this.settings.oauthDir);
    this.pool = new UpstreamPool(this.servers, {
      auth: (spec) => this.oauth.forServer(spec),
      // A server whose tools changed is listed again and re-indexed (debounced, capped in rate).
      onToolsChanged: (server) => this.catalog.toolsChanged(server),
    });
    this.catalog = new ToolCatalog(this.servers, (spec) => catalogListing(this.pool, spec), {
      stateDir: this.settings.stateDir,
      skillLister: (spec) => this.pool.listSkills(spec.name),
    });
    const s = this.settings;
    this.artifacts = new ArtifactStores(s.stateDir, {
      maxFile: s.maxArtifact,
      maxTotal: s.maxSessionArtifacts,
    });
    this.approvals = new ApprovalBroker({
      timeoutSeconds: s.confirmTimeout,
      fallback: s.confirmFallback,
      // A serve that publishes its activity can be answered from a dashboard page that shows it.
      watched: () => this.#activity !== undefined && watched(s.stateDir, process.pid),
    });
    this.detections = new DetectionCache(s.stateDir, options.version);
    this.added = new AddedServers({
      configured: { pool: this.pool, docs: this.catalog },
      stateDir: s.stateDir,
    });
    this.registry = registrySide(s, {
      policy: this.policy,
      servers: this.added,
      configured: () => this.servers.map((spec) => spec.name),
    });
    this.sessions = new SessionManager({
      runtime: () => this.runtime(),
      image: s.image,
      limits: { memory: s.memory, pids: s.pids, cpus: s.cpus },
      command: options.sandbox.command,
      bootstrap: (key) => options.sandbox.bootstrapFrame(this.bootstrapConfig(key)),
      rpc: sandboxApi(
        this.pool,
        this.catalog,
        toolResultForPython,
        this.policy,
        {
          mode: this.settings.skills,
          store: () => this.skillStore(),
          upstream: this.pool,
          skillDocs: () => this.catalog.skillDocs(),
          toolDocs: (server) => this.#toolDocs(server),
        },
        {
          view: (session) => this.added.view(session),
          methods: this.registry.methods,
          unplanned: this.settings.planUnplanned,
        },
      ),
      maxOutput: s.maxOutput,
      maxDisplay: s.maxDisplay,
      idleTimeout: s.idleTimeout,
      maxJobs: s.maxJobs,
      maxJobSeconds: s.maxJobTime,
      maxSessions: s.maxSessions,
      maxRuns: s.maxRuns,
      mounts: s.mounts,
      mountCopyBytes: s.maxMountCopy,
      onStartFailure: (runtime, error) => this.#startFailed(runtime, error),
    });
  }

  /** Discovers servers and builds a codemode; nothing is started yet. */
  static async create(options: CodemodeOptions): Promise<Codemode> {
    if (options.claimStateDir !== false) await claimStateDir(options.settings.stateDir, options.version);
    const discovery: Discovery = options.servers
      ? { servers: options.servers, skipped: [], diagnostics: [], files: [] }
      : await discoverServers(
        options.discoveryContext ?? defaultDiscoveryContext(),
        options.plugins.discoveryPlugins(),
        { allowSelf: options.settings.allowSelf, own: ownServers(options.settings) },
      );
    for (const d of discovery.diagnostics) logDiagnostic(d);
    const app = new Codemode(options, discovery);
    if (options.tracing) await app.#trace();
    // A serve loads its skills up front: its clients and search see them from the first request.
    if (options.indexInBackground) await app.skillStore();
    if (options.indexInBackground) {
      void inSpan("catalog.index", { "codemode.servers": app.servers.length }, () => app.catalog.start());
    }
    return app;
  }

  /** Starts exporting traces when an OTLP endpoint is set (docs/observability.md#traces). */
  async #trace(): Promise<void> {
    const target = exportTarget(this.settings.otlpEndpoint, process.env);
    if (!target) return;
    const configured = this.servers.flatMap((spec) => secretsOf(spec));
    // Servers a session added from a registry bring secrets of their own (the values a person filled in).
    const secrets = () =>
      [...new Set([...configured, ...this.added.secrets()])].sort((a, b) => b.length - a.length);
    await startTracing({
      url: target.url,
      env: process.env,
      content: this.settings.traceContent,
      version: this.#options.version,
      node: nodeIdOf(this.settings.nodeId),
      redact: (text) => redact(text, secrets()),
    });
  }

  /**
   * The sandbox runtime, selected once (lazily: detection runs commands), from cached verdicts where
   * they still hold.
   */
  runtime(): Promise<RuntimePlugin> {
    this.#choice ??= selectRuntime(
      this.settings.runtime,
      this.#options.plugins.runtimes(),
      this.detections,
      this.settings.isolation,
    );
    this.#choice.catch(() => (this.#choice = undefined));
    return this.#choice.then((choice) => {
      this.#runtimeInUse = choice.runtime.name;
      return choice.runtime;
    });
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

  /** The name of the sandbox runtime once one was selected. */
  get runtimeInUse(): string | undefined {
    return this.#runtimeInUse;
  }

  /** What the sandbox of session `sessionKey` is told at start-up (the servers it added among its servers). */
  bootstrapConfig(sessionKey?: string): BootstrapConfig {
    return {
      max_output: this.settings.maxOutput,
      max_display: this.settings.maxDisplay,
      max_jobs: this.settings.maxJobs,
      precheck: this.settings.precheck,
      servers: [
        ...this.servers.map((s) => ({
          name: s.name,
          alias: pythonAlias(s.name),
          ...(s.description ? { description: s.description } : {}),
        })),
        ...sessionKey ? this.added.bootstrapServers(sessionKey) : [],
      ],
      ...(this.registry.client ? { registry: { add: this.registry.addPolicy.mode } } : {}),
      artifacts: {
        dir: ARTIFACTS_DIR,
        max_file: this.settings.maxArtifact,
        max_files: MAX_ARTIFACTS_PER_RUN,
      },
    };
  }

  /** The artifact store of session `sessionKey`, made on first use. */
  artifactStore(sessionKey: string): ArtifactStore {
    let store = this.#stores.get(sessionKey);
    if (!store) {
      store = this.artifacts.open();
      this.#stores.set(sessionKey, store);
    }
    return store;
  }

  /** The artifact store of session `sessionKey`, if it has one. */
  findArtifactStore(sessionKey: string): ArtifactStore | undefined {
    return this.#stores.get(sessionKey);
  }

  /** Whether session `sessionKey` is at work: a run executing, MCP tasks working, or background jobs. */
  busy(sessionKey: string): boolean {
    const server = this.#clients.get(sessionKey);
    return this.sessions.busy(sessionKey) || this.sessions.liveJobs(sessionKey) > 0 ||
      (server !== undefined && this.#workingTasks(server) > 0);
  }

  /** Ends session `sessionKey`: stops its sandbox, deletes its artifacts, forgets its session approvals. */
  async closeSession(sessionKey: string): Promise<void> {
    this.approvals.forget(sessionKey);
    const store = this.#stores.get(sessionKey);
    this.#stores.delete(sessionKey);
    await Promise.allSettled([
      this.sessions.close(sessionKey),
      store && this.artifacts.close(store.id),
      this.added.close(sessionKey),
    ]);
  }

  /**
   * The local skills, loaded on first use (the SDK's skills catalog is part of its server side, which
   * one-shot commands that never touch a skill do not load); undefined when CODEMODE_SKILLS=off or they
   * could not be loaded at all.
   */
  skillStore(): Promise<SkillStore | undefined> {
    this.#skills ??= openSkills(this.#options).then((store) => {
      if (store) {
        this.#loadedSkills = store;
        this.catalog.setSkillDocs(store.docs());
        store.onChange(() => this.catalog.setSkillDocs(store.docs()));
      }
      return store;
    });
    return this.#skills;
  }

  /**
   * An MCP server for one client connection. A serving codemode publishes its stats for `codemode stats`
   * and its activity for `codemode ui` (unless CODEMODE_ACTIVITY=0). The server side of the MCP SDK loads
   * here, on first use: `run`, `search` and `doctor` never serve. Its sandbox is prewarmed as
   * CODEMODE_PREWARM says for `transport`: over stdio at once (the one client is connecting now, and the
   * start overlaps loading the server and the handshake), over HTTP when the session's client initializes.
   */
  async mcpServer(sessionKey: string, transport: "stdio" | "http" = "stdio"): Promise<McpServer> {
    const prewarm = this.settings.prewarm === "on" ||
      (this.settings.prewarm === "stdio" && transport === "stdio");
    if (prewarm && transport === "stdio") this.sessions.prewarm(sessionKey);
    const { createMcpServer, workingTasks } = await import("./serve/mcp_server.ts");
    this.#workingTasks = workingTasks;
    const skills = await this.skillStore();
    this.serving({ transport });
    const server = createMcpServer({
      runner: this.sessions,
      output: this.#options.plugins.output(this.settings.output),
      defaultTimeout: this.settings.timeout,
      maxTimeout: this.settings.maxTimeout,
      maxTaskTime: this.settings.maxTaskTime,
      capabilities: () =>
        capabilityText(
          this.servers,
          this.#runtimeName(),
          this.policy,
          this.#loadedSkills && {
            writable: this.#loadedSkills.mode === "rw",
            list: this.#loadedSkills.skills(),
          },
          { find: this.registry.client !== undefined, add: this.registry.addPolicy.mode },
        ),
      preload: (names) => this.preload(names),
      sessionKey,
      version: this.#options.version,
      artifacts: this.artifactStore(sessionKey),
      skills: skills?.catalog,
      approvals: this.approvals,
      ...(prewarm && transport === "http" ? { onInitialized: () => this.sessions.prewarm(sessionKey) } : {}),
    });
    this.#clients.set(sessionKey, server);
    const closed = server.server.onclose;
    server.server.onclose = () => {
      if (this.#clients.get(sessionKey) === server) this.#clients.delete(sessionKey);
      closed?.();
    };
    return server;
  }

  /**
   * Starts publishing stats and activity as a serve of `transport` (at `url`, as fleet node `node`, for
   * HTTP); once per process.
   */
  serving(info: { transport: "stdio" | "http"; url?: string; node?: string }): void {
    if (this.#serving) {
      if (info.url) this.#serving.url = info.url;
      if (info.node) this.#serving.node = info.node;
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
    const publisher = this.#activity;
    this.#stopApprovals = bridgeApprovals(
      this.approvals,
      new ActivityInbox(this.settings.stateDir),
      () => publisher.touch(),
    );
  }

  /** What this process publishes about itself for the dashboard. */
  async serveState(): Promise<ServeState> {
    const statuses = new Map(this.catalog.status().map((s) => [s.server, s]));
    return {
      pid: process.pid,
      version: this.#options.version,
      transport: this.#serving?.transport ?? "stdio",
      ...(this.#serving?.url ? { url: this.#serving.url } : {}),
      ...(this.#serving?.node ? { node: this.#serving.node } : {}),
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
          ...(statuses.has(spec.name) ? { index: statuses.get(spec.name)!.state } : {}),
          // Published twice a second: a server's thousands of tools must not make every publish heavy.
          tools: this.catalog.docs(spec.name).slice(0, STATE_TOOLS).map((d) => ({
            name: d.tool,
            ...(d.description ? { description: d.description.slice(0, 300) } : {}),
            ...(d.addedAt ? { addedAt: d.addedAt } : {}),
          })),
          toolCount: this.catalog.docs(spec.name).length,
          ...(statuses.get(spec.name)?.problems.length
            ? { problems: statuses.get(spec.name)!.problems }
            : {}),
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
      approvals: pendingApprovals(this.approvals),
      added: this.added.info(),
      artifactSessions: [...this.#stores.values()].map((store) => store.id),
    };
  }

  /** A server's tool docs for a skill's drift check: indexed ones, else listed now (undefined if it fails). */
  async #toolDocs(server: string): Promise<ToolDoc[] | undefined> {
    const indexed = this.catalog.docs(server);
    if (indexed.length) return indexed;
    try {
      return (await this.pool.listTools(server)).map((tool) => toolDoc(server, tool));
    } catch {
      return undefined;
    }
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
    this.#stopApprovals?.();
    await Promise.allSettled([
      this.sessions.closeAll(),
      this.pool.close(),
      this.added.closeAll(),
      this.catalog.close?.(),
      this.#stats?.stop(),
      this.artifacts.closeAll(),
      this.#activity?.stop(),
    ]);
    // Last: the spans of what just stopped go out with the others (waiting a bounded time).
    await stopTracing();
  }

  #runtimeName(): string | undefined {
    return this.settings.runtime === "auto" ? undefined : this.settings.runtime;
  }
}

/** The local skills, unless they are off; a failure to load them is logged, never fatal. */
async function openSkills(options: CodemodeOptions): Promise<SkillStore | undefined> {
  const settings = options.settings;
  if (settings.skills === "off") return undefined;
  try {
    const { SkillStore } = await import("./skills/store.ts");
    const store = await SkillStore.open({
      roots: skillRoots({ cwd: options.cwd, dirs: settings.skillDirs, userDir: settings.skillsDir }),
      mode: settings.skills,
    });
    for (const d of store.diagnostics()) log.info("skill problem", { path: d.path, message: d.message });
    return store;
  } catch (error) {
    log.warn("skills could not be loaded", { error: String(error) });
    return undefined;
  }
}

/** The node id spans carry: CODEMODE_NODE_ID, else the host name (as serve --http's session ids say). */
function nodeIdOf(configured: string | undefined): string {
  try {
    return resolveNodeId(configured);
  } catch {
    return hostname().toLowerCase();
  }
}

/** A server's tools listed for the catalog, in a span of its own (an upstream start nests under it). */
function catalogListing(pool: UpstreamPool, spec: ServerSpec) {
  return inSpan("catalog.list", { [ATTR.server]: spec.name }, async (span) => {
    const listing = await pool.listing(spec.name);
    span.set({ "codemode.tools": listing.tools.length, "codemode.tools.left_out": listing.problems.length });
    return listing;
  });
}

function logDiagnostic(d: Diagnostic): void {
  const fields = { file: d.file, server: d.server, message: d.message };
  if (d.severity === "error") log.warn("config problem", fields);
  else log.info("config note", fields);
}
