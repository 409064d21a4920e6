/**
 * MCP over Streamable HTTP: one `node:http` server, one MCP session per client (its `Mcp-Session-Id`),
 * each with its own MCP server and so its own sandbox. A session ends when its client sends DELETE, when
 * it has had no open request for the idle timeout and nothing of it is still at work (an MCP task, a
 * background job), or when the server closes; so a client whose connection dropped can come back to its
 * session and collect its tasks. Every request passes the guard (Host, Origin, token) and the body cap
 * before it is parsed.
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
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
  /** Largest request body in bytes (default 4 MiB); larger ones get 413. */
  maxBodyBytes?: number;
  /** Seconds a session may go without an open request before it is ended. */
  idleTimeout: number;
  /** Builds the MCP server of a new session. */
  open(sessionId: string): McpServer | Promise<McpServer>;
  /** Frees what a session held (its sandbox) once it has ended. */
  close(sessionId: string): Promise<void>;
  /** Whether a session still has work going (MCP tasks, background jobs): it is then not ended as idle. */
  busy?(sessionId: string): boolean;
  /** The artifact store of a session, for `GET /artifacts/<session>/<path>`. */
  artifacts?: StoreLookup;
  /** Answers requests for every other path than MCP's (the dashboard); without it they get 404. */
  routes?(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: McpServer;
  open: number;
  idle?: ReturnType<typeof setTimeout>;
}

/** A listening MCP HTTP server. */
export class McpHttpServer {
  #options: HttpServerOptions;
  #http: Server;
  #sessions = new Map<string, Session>();
  #allowedHosts: string[] | undefined;
  #closing = false;

  private constructor(options: HttpServerOptions) {
    this.#options = options;
    this.#allowedHosts = allowedHostsFor(options.host);
    this.#http = createServer((req, res) => {
      this.#handle(req, res).catch((error) => {
        log.error("HTTP request failed", { error: String(error) });
        if (!res.headersSent) sendError(res, 500, "Internal server error", {}, -32603);
        else if (!res.writableEnded) res.end();
      });
    });
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
    const artifact = url.pathname.startsWith(ARTIFACTS_PATH);
    if (url.pathname !== MCP_PATH && !artifact) {
      if (this.#options.routes) return await this.#options.routes(req, res);
      return sendError(res, 404, `Not found: MCP is served at ${MCP_PATH}`);
    }
    const refusal = guardRequest(
      { host: req.headers.host, origin: req.headers.origin, authorization: req.headers.authorization },
      { allowedHosts: this.#allowedHosts, token: this.#options.token },
    );
    if (refusal) {
      log.warn("refused HTTP request", { status: refusal.status, reason: refusal.message });
      return sendError(res, refusal.status, refusal.message, refusal.headers);
    }
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
      if (!session) return sendError(res, 404, `Session "${id}" not found: initialize a new one`, {}, -32001);
    } else if (req.method === "POST" && isInitializeRequest(parsedBody)) {
      session = await this.#create();
    } else {
      return sendError(res, 400, "Bad request: send Mcp-Session-Id, or an initialize request to start");
    }

    session.open++;
    if (session.idle) clearTimeout(session.idle);
    try {
      const response = await session.transport.handleRequest(toWebRequest(req, url), { parsedBody });
      await sendResponse(res, response);
    } finally {
      session.open--;
      const sid = session.transport.sessionId;
      if (!sid) await this.#discard(session); // the initialize request was refused: no session began
      else if (session.open === 0 && this.#sessions.get(sid) === session) this.#armIdle(sid, session);
    }
  }

  async #create(): Promise<Session> {
    const id = randomUUID();
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
    const session: Session = { transport, server, open: 0 };
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
