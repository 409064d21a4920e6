/**
 * MCP over Streamable HTTP: one `node:http` server, one MCP session per client (its `Mcp-Session-Id`,
 * minted with this node's id so a balancer can route by it), each with its own MCP server and so its own
 * sandbox. A session ends when its client sends DELETE, when it has had no open request for the idle
 * timeout and nothing of it is still at work (an MCP task, a background job), or when the server closes;
 * so a client whose connection dropped can come back to its session and collect its tasks. Every request
 * passes the guard (Host, Origin, token) and the body cap before it is parsed. `/readyz` says whether the
 * node takes new sessions; a draining node refuses them (503) and keeps serving its live ones.
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  DEFAULT_MAX_REQUEST_BODY_SIZE,
  isInitializeRequest,
  type McpServer,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import { allowedHostsFor, guardRequest } from "./http_guard.ts";
import { readBody, sendError, sendResponse, toWebRequest } from "./node_http_bridge.ts";
import { log } from "../observe/log.ts";
import { ARTIFACTS_PATH, serveArtifact, type StoreLookup } from "./artifact_http.ts";
import { mintSessionId, nodeOfSession } from "./node_id.ts";
import { Readiness, READY_PATH, waitFor } from "./readiness.ts";

/** How long an idle kept-alive connection stays open: longer than balancers keep theirs (HAProxy, nginx). */
const KEEP_ALIVE_MS = 75_000;

/** The path MCP is served on. */
export const MCP_PATH = "/mcp";

/** How the HTTP server listens and what a session is made of. */
export interface HttpServerOptions {
  /** Address to listen on (a loopback address unless the operator asked otherwise). */
  host: string;
  /** Port; 0 picks a free one. */
  port: number;
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** This node's id (node_id.ts): the prefix of every session id it mints. */
  node: string;
  /** Host names a balancer forwards requests under, beside the bound address (`--allowed-hosts`). */
  allowedHosts?: readonly string[];
  /** Whether a new session could get a sandbox now; `/readyz` answers 503 "full" when not. */
  room?(): boolean;
  /**
   * Whether a session is at work: a run executing in its sandbox, an MCP task working, a background job
   * running. A drain ends no session while it is (until the drain timeout), nor does the idle timeout.
   */
  busy?(sessionId: string): boolean;
  /** Largest request body in bytes (default 4 MiB); larger ones get 413. */
  maxBodyBytes?: number;
  /** Seconds a session may go without an open request before it is ended. */
  idleTimeout: number;
  /** Builds the MCP server of a new session. */
  open(sessionId: string): McpServer | Promise<McpServer>;
  /** Frees what a session held (its sandbox) once it has ended. */
  close(sessionId: string): Promise<void>;
  /** The artifact store of a session, for `GET /artifacts/<session>/<path>`. */
  artifacts?: StoreLookup;
  /** Answers requests for every other path than MCP's (the dashboard); without it they get 404. */
  routes?(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: McpServer;
  /** Requests open now, event streams included. */
  open: number;
  /** POST requests being answered now (a run's request stays open until its result is sent). */
  posts: number;
  idle?: ReturnType<typeof setTimeout>;
}

/** A listening MCP HTTP server. */
export class McpHttpServer {
  #options: HttpServerOptions;
  #http: Server;
  #sessions = new Map<string, Session>();
  #allowedHosts: string[] | undefined;
  #closing = false;
  #readiness: Readiness;
  /** POST requests being answered now, one token each. */
  #posts = new Set<object>();
  /** The requests that were in flight when the drain began: no session ends before they are answered. */
  #inFlightAtDrain = new Set<object>();

  private constructor(options: HttpServerOptions) {
    this.#options = options;
    this.#allowedHosts = allowedHostsFor(options.host, options.allowedHosts);
    this.#readiness = new Readiness({
      node: options.node,
      sessions: () => this.#sessions.size,
      room: () => options.room?.() ?? true,
    });
    this.#http = createServer((req, res) => {
      this.#handle(req, res).catch((error) => {
        log.error("HTTP request failed", { error: String(error) });
        if (!res.headersSent) sendError(res, 500, "Internal server error", {}, -32603);
        else if (!res.writableEnded) res.end();
      });
    });
    // A balancer keeps connections to the node open between requests: the node must not be the one to
    // close an idle one first, or a request sent on it as it closes is lost (the balancer retries it).
    this.#http.keepAliveTimeout = KEEP_ALIVE_MS;
    this.#http.headersTimeout = KEEP_ALIVE_MS + 5_000;
  }

  /** Starts listening; rejects with a clear message when the address is taken or not ours. */
  static async start(options: HttpServerOptions): Promise<McpHttpServer> {
    const server = new McpHttpServer(options);
    await new Promise<void>((resolve, reject) => {
      const fail = (error: NodeJS.ErrnoException) => reject(listenError(error, options));
      server.#http.once("error", fail);
      server.#http.listen(options.port, options.host, () => {
        server.#http.off("error", fail);
        resolve();
      });
    });
    return server;
  }

  /** The URL clients connect to. */
  get url(): string {
    const { address, port } = this.#http.address() as AddressInfo;
    const host = address.includes(":") ? `[${address}]` : address;
    return `http://${host}:${port}${MCP_PATH}`;
  }

  /** The port listened on (useful with port 0). */
  get port(): number {
    return (this.#http.address() as AddressInfo).port;
  }

  /** Number of live MCP sessions. */
  get sessions(): number {
    return this.#sessions.size;
  }

  /** Whether the node drains. */
  get draining(): boolean {
    return this.#readiness.draining;
  }

  /**
   * Starts draining: `initialize` gets 503 with Retry-After (a balancer retries it on another node) and
   * `/readyz` 503, while the live sessions are still served. Ends nothing by itself: see `drained()`.
   */
  drain(): void {
    if (this.#readiness.draining) return;
    log.info("draining: no new sessions", { sessions: this.#sessions.size, inFlight: this.#posts.size });
    this.#readiness.drain();
    this.#inFlightAtDrain = new Set(this.#posts);
  }

  /**
   * Ends a draining node's sessions, none in the middle of its work: once the requests in flight when
   * the drain began have been answered (their sessions' other requests are served meanwhile), each
   * session ends as on DELETE at its first moment with no request being answered and no run executing,
   * so a client that keeps its session busy still loses no run. Resolves when no session is left, or
   * after `timeoutMs` (`close()` ends the rest).
   */
  async drained(timeoutMs: number): Promise<"drained" | "timeout"> {
    const ending: Promise<void>[] = [];
    const done = await waitFor(() => {
      for (const request of this.#inFlightAtDrain) if (this.#posts.has(request)) return false;
      for (const [id, session] of this.#sessions) {
        if (session.posts === 0 && !this.#options.busy?.(id)) ending.push(this.#end(id, "drained"));
      }
      return this.#sessions.size === 0;
    }, timeoutMs);
    await Promise.allSettled(ending);
    return done ? "drained" : "timeout";
  }

  /** Stops accepting requests and ends every session (each frees its sandbox). */
  async close(): Promise<void> {
    this.#closing = true;
    const closed = new Promise<void>((resolve) => this.#http.close(() => resolve()));
    await Promise.allSettled([...this.#sessions.keys()].map((id) => this.#end(id, "server closing")));
    // Open server-sent event streams would otherwise hold the server open.
    (this.#http as { closeAllConnections?: () => void }).closeAllConnections?.();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname === READY_PATH) return this.#ready(req, res);
    const artifact = url.pathname.startsWith(ARTIFACTS_PATH);
    if (url.pathname !== MCP_PATH && !artifact) {
      if (this.#options.routes) return await this.#options.routes(req, res);
      return sendError(res, 404, `Not found: MCP is served at ${MCP_PATH}`);
    }
    if (this.#refused(req, res, this.#options.token)) return;
    if (artifact) {
      const lookup = (id: string) => this.#sessions.has(id) ? this.#options.artifacts?.(id) : undefined;
      return await serveArtifact(req, res, url.pathname, lookup);
    }
    if (req.method !== "POST" && req.method !== "GET" && req.method !== "DELETE") {
      return sendError(res, 405, `Method "${req.method}" not allowed: use POST, GET or DELETE`, {
        allow: "POST, GET, DELETE",
      });
    }
    if (this.#closing) return sendError(res, 503, "The server is shutting down");

    let parsedBody: unknown;
    if (req.method === "POST") {
      const body = await readBody(req, this.#options.maxBodyBytes ?? DEFAULT_MAX_REQUEST_BODY_SIZE);
      if (body === "too large") {
        const max = this.#options.maxBodyBytes ?? DEFAULT_MAX_REQUEST_BODY_SIZE;
        return sendError(res, 413, `Request body over the ${max}-byte limit`, { connection: "close" });
      }
      try {
        parsedBody = JSON.parse(new TextDecoder().decode(body));
      } catch {
        return sendError(res, 400, "Parse error: the body is not JSON", {}, -32700);
      }
    }

    const id = req.headers["mcp-session-id"];
    let session: Session | undefined;
    if (typeof id === "string") {
      session = this.#sessions.get(id);
      if (!session) return sendError(res, 404, this.#notFound(id), {}, -32001);
    } else if (req.method === "POST" && isInitializeRequest(parsedBody)) {
      if (this.#readiness.draining) {
        return sendError(
          res,
          503,
          `Node "${this.#options.node}" is draining and takes no new session: retry, and a balancer sends ` +
            "it to another node",
          { "retry-after": "1" },
        );
      }
      session = await this.#create();
    } else {
      return sendError(res, 400, "Bad request: send Mcp-Session-Id, or an initialize request to start");
    }

    session.open++;
    if (session.idle) clearTimeout(session.idle);
    const post = req.method === "POST" ? {} : undefined;
    if (post) this.#posts.add(post), session.posts++;
    try {
      const response = await session.transport.handleRequest(toWebRequest(req, url), { parsedBody });
      await sendResponse(res, response);
    } finally {
      if (post) this.#posts.delete(post), session.posts--;
      session.open--;
      const sid = session.transport.sessionId;
      if (!sid) await this.#discard(session); // the initialize request was refused: no session began
      else if (session.open === 0 && this.#sessions.get(sid) === session) this.#armIdle(sid, session);
    }
  }

  /** Refuses (and answers) a request the guard turns away; `token` undefined skips the token check. */
  #refused(req: IncomingMessage, res: ServerResponse, token: string | undefined): boolean {
    const refusal = guardRequest(
      { host: req.headers.host, origin: req.headers.origin, authorization: req.headers.authorization },
      { allowedHosts: this.#allowedHosts, token },
    );
    if (!refusal) return false;
    log.warn("refused HTTP request", { status: refusal.status, reason: refusal.message });
    sendError(res, refusal.status, refusal.message, refusal.headers);
    return true;
  }

  /** `/readyz`: for probes, so without the token (they cannot send one); Host and Origin still checked. */
  #ready(req: IncomingMessage, res: ServerResponse): void {
    if (this.#refused(req, res, undefined)) return;
    if (req.method !== "GET" && req.method !== "HEAD") {
      return sendError(res, 405, `Method "${req.method}" not allowed: use GET`, { allow: "GET, HEAD" });
    }
    const { status, body } = this.#readiness.check();
    res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
    res.end(req.method === "HEAD" ? undefined : JSON.stringify(body));
  }

  /** Why a session id names no live session here, and what the client should do. */
  #notFound(id: string): string {
    const shown = id.length > 200 ? `${id.slice(0, 200)}...` : id;
    const owner = nodeOfSession(id);
    const where = owner && owner !== this.#options.node
      ? ` on this node ("${this.#options.node}"); it names node "${owner}", which may have stopped`
      : "";
    return `Session "${shown}" not found${where}: start a new session with initialize`;
  }

  async #create(): Promise<Session> {
    const id = mintSessionId(this.#options.node);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      onsessioninitialized: () => {
        this.#sessions.set(id, session);
        log.info("HTTP session started", { session: id, sessions: this.#sessions.size });
      },
      onsessionclosed: () => this.#end(id, "client ended the session"),
      maxRequestBodySize: this.#options.maxBodyBytes ?? DEFAULT_MAX_REQUEST_BODY_SIZE,
    });
    const server = await this.#options.open(id);
    const session: Session = { transport, server, open: 0, posts: 0 };
    await server.connect(transport);
    return session;
  }

  async #discard(session: Session): Promise<void> {
    await session.server.close().catch(() => {});
  }

  #armIdle(id: string, session: Session): void {
    session.idle = setTimeout(() => {
      if (session.open > 0) return;
      if (this.#options.busy?.(id)) return this.#armIdle(id, session);
      void this.#end(id, "idle");
    }, this.#options.idleTimeout * 1000);
    (session.idle as { unref?: () => void }).unref?.();
  }

  async #end(id: string, why: string): Promise<void> {
    const session = this.#sessions.get(id);
    if (!session) return;
    this.#sessions.delete(id);
    if (session.idle) clearTimeout(session.idle);
    await Promise.allSettled([session.server.close(), this.#options.close(id)]);
    log.info("HTTP session ended", { session: id, why, sessions: this.#sessions.size });
  }
}

function listenError(error: NodeJS.ErrnoException, options: HttpServerOptions): Error {
  const where = `${options.host}:${options.port}`;
  if (error.code === "EADDRINUSE") {
    return new Error(`Address "${where}" is in use: pass another --port, or --port 0 to pick a free one`);
  }
  if (error.code === "EADDRNOTAVAIL" || error.code === "ENOTFOUND") {
    return new Error(`Cannot listen on "${where}": the host is not an address of this machine; check --host`);
  }
  if (error.code === "EACCES") {
    return new Error(`Not allowed to listen on "${where}": use a port above 1023`);
  }
  return new Error(`Cannot listen on "${where}": ${error.message}`);
}
