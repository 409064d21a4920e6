/**
 * `codemode serve --http`: MCP over Streamable HTTP for many clients at once, each with its own sandbox.
 * Listens on loopback unless told otherwise, and refuses a non-loopback address without a token. Prints
 * the URL on stderr; stdout stays empty. Stops every sandbox and upstream server on SIGINT or SIGTERM.
 * @module
 */
import { startServeApp } from "./_serve_app.ts";
import { McpHttpServer } from "../core/serve/http_server.ts";
import { allowedHostsFor, isLoopbackHost } from "../core/serve/http_guard.ts";
import { dashboardFor } from "./serve_dashboard.ts";
import { log } from "../core/observe/log.ts";

/** Default port of `serve --http`. */
export const DEFAULT_PORT = 8765;
/** Default address of `serve --http`: loopback only. */
export const DEFAULT_HOST = "127.0.0.1";

/** The environment variable that holds the bearer token (`--token` wins over it). */
export const TOKEN_ENV = "CODEMODE_HTTP_TOKEN";

/** Options of `serve --http`, as commander hands them over. */
export interface HttpServeOptions {
  port?: string;
  host?: string;
  token?: string;
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
  const app = await startServeApp();
  const dashboard = dashboardFor(app, { token, allowedHosts: allowedHostsFor(host) });
  let http: McpHttpServer;
  try {
    http = await McpHttpServer.start({
      host,
      port,
      token,
      idleTimeout: app.settings.idleTimeout,
      open: (id) => app.mcpServer(id, "http"),
      close: (id) => app.closeSession(id),
      busy: (id) => app.busy(id),
      artifacts: (id) => app.findArtifactStore(id),
      routes: (req, res) => dashboard.handle(req, res),
    });
  } catch (error) {
    await app.close();
    process.stderr.write(`codemode: ${(error as Error).message}\n`);
    return 1;
  }
  app.serving({ transport: "http", url: http.url });
  process.stderr.write(`codemode: serving MCP over HTTP at ${http.url}${token ? " (token required)" : ""}\n`);
  process.stderr.write(`codemode: dashboard at ${http.url.replace(/\/mcp$/, "/")}\n`);
  log.info("serving over HTTP", { url: http.url, token: Boolean(token) });

  const why = await new Promise<string>((resolve) => {
    process.once("SIGINT", () => resolve("SIGINT"));
    process.once("SIGTERM", () => resolve("SIGTERM"));
  });
  log.info("shutting down", { why, sessions: http.sessions });
  await dashboard.close();
  await Promise.race([
    Promise.allSettled([http.close(), app.close()]),
    new Promise((r) => setTimeout(r, 10_000)),
  ]);
  // Exit explicitly: upstream child handles or timers must not keep a finished server alive.
  setTimeout(() => process.exit(0), 50).unref?.();
  return 0;
}

function usage(message: string): number {
  process.stderr.write(`codemode: ${message}\n`);
  return 2;
}
