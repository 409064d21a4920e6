/**
 * `codemode serve --http`: MCP over Streamable HTTP for many clients at once, each with its own sandbox.
 * Listens on loopback unless told otherwise, and refuses a non-loopback address without a token. Prints
 * the URL on stderr; stdout stays empty. As a node of a fleet (docs/scale.md) it mints session ids with
 * its node id, and on SIGTERM drains: no new sessions, the live ones served, each ended once its work in
 * flight is done (CODEMODE_DRAIN_TIMEOUT at most), then every sandbox and upstream server is stopped and it
 * exits 0. SIGINT, or a second signal during the drain, stops at once (still removing every sandbox).
 * @module
 */
import { startServeApp } from "./_serve_app.ts";
import { McpHttpServer } from "../core/serve/http_server.ts";
import { allowedHostsFor, isLoopbackHost } from "../core/serve/http_guard.ts";
import { resolveNodeId } from "../core/serve/node_id.ts";
import { parseHostNames } from "../core/config/settings.ts";
import { dashboardFor } from "./serve_dashboard.ts";
import { log, setProcessLogFields } from "../core/observe/log.ts";
import { stats } from "../core/observe/stats.ts";

/** Default port of `serve --http`. */
export const DEFAULT_PORT = 8765;
/** Default address of `serve --http`: loopback only. */
export const DEFAULT_HOST = "127.0.0.1";

/** The environment variable that holds the bearer token (`--token` wins over it). */
export const TOKEN_ENV = "CODEMODE_HTTP_TOKEN";

/** How long stopping may take before the process exits anyway. */
const STOP_LIMIT_MS = 10_000;

/** Options of `serve --http`, as commander hands them over. */
export interface HttpServeOptions {
  port?: string;
  host?: string;
  token?: string;
  /** Comma-separated host names a balancer forwards under (beats CODEMODE_ALLOWED_HOSTS). */
  allowedHosts?: string;
}

/** Runs the HTTP MCP server until SIGINT or SIGTERM; resolves with the exit code. */
export async function serveHttp(options: HttpServeOptions): Promise<number> {
  const port = Number(options.port ?? DEFAULT_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    return usage(`Invalid --port "${options.port}": expected a whole number from 0 to 65535`);
  }
  const host = (options.host ?? DEFAULT_HOST).trim();
  // The environment is the better place for a secret: the command line shows in `ps`.
  const token = (options.token ?? process.env[TOKEN_ENV])?.trim() || undefined;
  if (!isLoopbackHost(host) && !token) {
    return usage(
      `Refusing to listen on "${host}" without a token: anyone who reaches it could run code with your ` +
        "MCP servers; set ${TOKEN_ENV} (or --token), or use --host 127.0.0.1",
    );
  }
  const flagHosts = options.allowedHosts === undefined ? undefined : parseHostNames(options.allowedHosts);
  if (flagHosts && "error" in flagHosts) {
    return usage(`Invalid --allowed-hosts "${options.allowedHosts}": ${flagHosts.error}`);
  }
  // Signals are heard from the start: one that comes while the app starts still stops it cleanly.
  const signals = new Signals();
  const app = await startServeApp();
  let node: string;
  try {
    node = resolveNodeId(app.settings.nodeId);
  } catch (error) {
    await app.close();
    signals.stop();
    return usage((error as Error).message);
  }
  setProcessLogFields({ node });
  const allowedHosts = flagHosts?.names ?? app.settings.allowedHosts;
  const dashboard = dashboardFor(app, { node, token, allowedHosts: allowedHostsFor(host, allowedHosts) });
  let http: McpHttpServer;
  try {
    http = await McpHttpServer.start({
      host,
      port,
      token,
      node,
      allowedHosts,
      idleTimeout: app.settings.idleTimeout,
      room: () => app.sessions.hasRoom(),
      open: (id) => app.mcpServer(id, "http"),
      close: (id) => app.closeSession(id),
      busy: (id) => app.busy(id),
      artifacts: (id) => app.findArtifactStore(id),
      routes: (req, res) => dashboard.handle(req, res),
    });
  } catch (error) {
    await app.close();
    signals.stop();
    process.stderr.write(`codemode: ${(error as Error).message}\n`);
    return 1;
  }
  stats.metrics.describeNode(node, () => !http.draining && app.sessions.hasRoom());
  app.serving({ transport: "http", url: http.url, node });
  process.stderr.write(
    `codemode: serving MCP over HTTP at ${http.url} as node "${node}"${token ? " (token required)" : ""}\n`,
  );
  process.stderr.write(`codemode: dashboard at ${http.url.replace(/\/mcp$/, "/")}\n`);
  log.info("serving over HTTP", { url: http.url, token: Boolean(token) });

  const first = await signals.next();
  if (first === "SIGTERM") {
    const limit = app.settings.drainTimeout;
    http.drain();
    process.stderr.write(
      `codemode: draining: no new sessions; each session ends once its work is done (${limit}s at most)\n`,
    );
    const started = Date.now();
    const outcome = await Promise.race([http.drained(limit * 1000), signals.next()]);
    log.info("drain over", { outcome, seconds: (Date.now() - started) / 1000, sessions: http.sessions });
  }
  log.info("shutting down", { sessions: http.sessions });
  await dashboard.close();
  await Promise.race([
    Promise.allSettled([http.close(), app.close()]),
    new Promise((r) => setTimeout(r, STOP_LIMIT_MS)),
  ]);
  // Exit explicitly: upstream child handles or timers must not keep a finished server alive.
  setTimeout(() => process.exit(0), 50).unref?.();
  return 0;
}

/**
 * SIGINT and SIGTERM, one at a time, heard by listeners that stay installed until the process ends: a
 * signal during shutdown must not fall back to the default action (death, with sandboxes left running).
 */
class Signals {
  #waiting: ((signal: "SIGINT" | "SIGTERM") => void)[] = [];
  /** Signals nobody waited for yet. */
  #heard: ("SIGINT" | "SIGTERM")[] = [];
  #handlers = {
    SIGINT: () => this.#hear("SIGINT"),
    SIGTERM: () => this.#hear("SIGTERM"),
  };

  constructor() {
    process.on("SIGINT", this.#handlers.SIGINT);
    process.on("SIGTERM", this.#handlers.SIGTERM);
  }

  /** The next signal. */
  next(): Promise<"SIGINT" | "SIGTERM"> {
    const heard = this.#heard.shift();
    if (heard) return Promise.resolve(heard);
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Removes the listeners (the server never started). */
  stop(): void {
    process.off("SIGINT", this.#handlers.SIGINT);
    process.off("SIGTERM", this.#handlers.SIGTERM);
  }

  #hear(signal: "SIGINT" | "SIGTERM"): void {
    log.info("signal", { signal });
    const waiting = this.#waiting.splice(0);
    if (!waiting.length) this.#heard.push(signal);
    for (const resolve of waiting) resolve(signal);
  }
}

function usage(message: string): number {
  process.stderr.write(`codemode: ${message}\n`);
  return 2;
}
