/**
 * The servers each session added from a registry. A session's added servers are its own: their
 * connections live in a pool of the session (two sessions adding the same server each start their own
 * process, so no state is shared), their docs in a catalog of the session, and the session's view joins
 * both to the configured servers, which every session shares. Nothing another session does can reach
 * them; they stop when their session ends (stdio: the process; HTTP: the MCP session) or when sandbox
 * code removes them.
 * @module
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import type { SearchHit } from "../catalog/index.ts";
import { ToolCatalog } from "../catalog/catalog.ts";
import { UpstreamPool } from "../upstream/pool.ts";
import { secretsOf } from "../upstream/redact.ts";
import type { DocSearch, ServerView, ToolCaller } from "./api.ts";
import type { AddedServerInfo } from "../observe/serve_state.ts";

/** One server a session added. */
export interface AddedServer {
  /** Its name on the host and in Python (`mcp_<alias>`). */
  alias: string;
  /** Its registry name (`io.github.modelcontextprotocol/server-memory`). */
  name: string;
  version: string;
  /** The registry's host. */
  registry: string;
  /** What runs, as the question showed it: the command line or the URL. */
  runs: string;
  /** How it is started (with the values the user gave: never shown to sandbox code). */
  spec: ServerSpec;
  addedAt: string;
  /** The config file it was written to, when the user chose to keep it. */
  kept?: string;
}

/** What every session's servers are built on. */
export interface AddedServersOptions {
  /** The configured servers: shared by every session. */
  configured: { pool: ToolCaller; docs: DocSearch };
  /** Where the catalog caches tool docs. */
  stateDir: string;
  /** Milliseconds an added server may take to start and list its tools. */
  startTimeoutMs?: number;
}

/** The added servers of one session, and its view of every server it can reach. */
export class SessionServers implements ServerView {
  readonly pool: ToolCaller;
  readonly docs: DocSearch;
  #added = new Map<string, AddedServer>();
  #upstream: UpstreamPool;
  #catalog: ToolCatalog;
  #configured: AddedServersOptions["configured"];

  /** Servers of one session, over the `configured` ones. */
  constructor(options: AddedServersOptions) {
    this.#configured = options.configured;
    // npx may first download the package: the run's own timeout is the real bound.
    this.#upstream = new UpstreamPool([], {
      startTimeoutMs: options.startTimeoutMs ?? 120_000,
      // As for configured servers: a server whose tools changed is listed again and re-indexed.
      onToolsChanged: (server) => this.#catalog.toolsChanged(server),
    });
    // The listing with its problems (tools left out by the caps), as for configured servers.
    this.#catalog = new ToolCatalog([], (spec) => this.#upstream.listing(spec.name), {
      stateDir: options.stateDir,
    });
    const configured = options.configured;
    const ours = (name: string) => this.#added.has(name);
    this.pool = {
      names: () => [...configured.pool.names(), ...this.#added.keys()],
      spec: (name) => ours(name) ? this.#added.get(name)!.spec : configured.pool.spec(name),
      listTools: (name) => ours(name) ? this.#upstream.listTools(name) : configured.pool.listTools(name),
      callTool: (name, tool, args, options): Promise<CallToolResult> =>
        ours(name)
          ? this.#upstream.callTool(name, tool, args, options)
          : configured.pool.callTool(name, tool, args, options),
    };
    this.docs = {
      search: (query, options) => this.#search(query, options),
      docs: (server) => ours(server) ? this.#catalog.docs(server) : configured.docs.docs(server),
    };
  }

  /** How many servers this session added. */
  get size(): number {
    return this.#added.size;
  }

  /** The servers this session added, oldest first. */
  added(): AddedServer[] {
    return [...this.#added.values()];
  }

  /** The server added as `alias`, if this session added one. */
  get(alias: string): AddedServer | undefined {
    return this.#added.get(alias);
  }

  /** Where the added server `alias` is in its lifecycle (idle, starting, ready, failed, closed). */
  status(alias: string): string {
    return this.#added.has(alias) ? this.#upstream.status(alias).state : "removed";
  }

  /** Configured values of the added servers (env, headers): kept out of questions and errors. */
  secrets(): string[] {
    return this.added().flatMap((server) => secretsOf(server.spec));
  }

  /**
   * Starts `server`, lists its tools and puts them in search, all before it counts as added; a server that
   * does not start is stopped and forgotten, and the error thrown.
   */
  async add(server: AddedServer): Promise<Tool[]> {
    // Two adds of one alias can both wait for the person; the second one approved finds it taken.
    if (this.#added.has(server.alias)) {
      throw new RangeError(`the alias "${server.alias}" was taken by another add of this session meanwhile`);
    }
    this.#upstream.add(server.spec);
    try {
      const tools = await this.#upstream.listTools(server.alias);
      await this.joinCatalog(server.spec, tools);
      this.#added.set(server.alias, server);
      return tools;
    } catch (error) {
      this.#catalog.removeServer(server.alias);
      await this.#upstream.remove(server.alias);
      throw error;
    }
  }

  /**
   * The added server's tools join the session's catalog, so search finds them at once. The one place they
   * enter it: when its tool list changes later, the catalog's refresh path re-lists it.
   */
  async joinCatalog(spec: ServerSpec, tools: Tool[]): Promise<void> {
    await this.#catalog.addServer(spec, tools);
  }

  /** Marks an added server as kept in `file`. */
  kept(alias: string, file: string): void {
    const server = this.#added.get(alias);
    if (server) server.kept = file;
  }

  /** Stops the server added as `alias` and drops it from search; false when this session added none. */
  async remove(alias: string): Promise<boolean> {
    if (!this.#added.delete(alias)) return false;
    this.#catalog.removeServer(alias);
    await this.#upstream.remove(alias);
    return true;
  }

  /** Stops every added server (the session ended). */
  async close(): Promise<void> {
    this.#added.clear();
    await Promise.allSettled([this.#upstream.close(), this.#catalog.close()]);
  }

  /**
   * Search over the configured servers and the added ones. Each index scores in 0..1 the same way, so the
   * hits are merged by score; the added servers' index is small and rebuilt only when one is added.
   */
  async #search(query: string, options: { limit?: number; server?: string }): Promise<SearchHit[]> {
    const server = options.server;
    if (server !== undefined && this.#added.has(server)) return this.#catalog.search(query, options);
    const configured = await this.#configured.docs.search(query, options);
    if (server !== undefined || !this.#added.size) return configured;
    const added = await this.#catalog.search(query, options);
    const limit = options.limit ?? 10;
    return [...configured, ...added].sort((a, b) => b.score - a.score).slice(0, limit);
  }
}

/** The added servers of every session. */
export class AddedServers {
  #sessions = new Map<string, SessionServers>();
  #options: AddedServersOptions;

  /** Sessions' servers over the `configured` ones. */
  constructor(options: AddedServersOptions) {
    this.#options = options;
  }

  /** The view of `session` when it added servers; undefined when it added none. */
  view(session: string): SessionServers | undefined {
    return this.#sessions.get(session);
  }

  /** The servers of `session`, made on first use. */
  of(session: string): SessionServers {
    let servers = this.#sessions.get(session);
    if (!servers) this.#sessions.set(session, servers = new SessionServers(this.#options));
    return servers;
  }

  /** Every session's added servers, as a serve publishes them (no launch spec: it holds the secrets). */
  info(): AddedServerInfo[] {
    return [...this.#sessions].flatMap(([session, servers]) =>
      servers.added().map((a) => ({
        session,
        alias: a.alias,
        name: a.name,
        version: a.version,
        registry: a.registry,
        runs: a.runs,
        addedAt: a.addedAt,
        ...(a.kept ? { kept: a.kept } : {}),
        state: servers.status(a.alias),
        tools: servers.docs.docs(a.alias).length,
      }))
    );
  }

  /** The servers `session` added, as its sandbox's first frame lists them. */
  bootstrapServers(session: string): { name: string; alias: string; description?: string; added: object }[] {
    return (this.#sessions.get(session)?.added() ?? []).map((a) => ({
      name: a.alias,
      alias: a.alias,
      ...(a.spec.description ? { description: a.spec.description } : {}),
      added: { name: a.name, version: a.version },
    }));
  }

  /** Stops the servers `session` added (the session ended). */
  async close(session: string): Promise<void> {
    const servers = this.#sessions.get(session);
    this.#sessions.delete(session);
    await servers?.close();
  }

  /** Stops every session's added servers. */
  async closeAll(): Promise<void> {
    const all = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.allSettled(all.map((s) => s.close()));
  }
}
