/**
 * `codemode serve`: the stdio MCP server. stdout carries only protocol messages; logs go to stderr.
 * Stops every sandbox and upstream server on SIGINT, SIGTERM, or EOF on stdin. With `--http` it hands
 * over to `serve_http.ts` (Streamable HTTP, many clients).
 * @module
 */
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { startServeApp } from "./_serve_app.ts";
import { log } from "../core/observe/log.ts";
import type { HttpServeOptions } from "./serve_http.ts";

/** Options of `codemode serve`. */
export interface ServeOptions extends HttpServeOptions {
  /** Serve Streamable HTTP instead of stdio. */
  http?: boolean;
}

/** Runs the MCP server (stdio unless `http`) until the client or a signal stops it; returns the exit code. */
export async function serve(options: ServeOptions = {}): Promise<number> {
  if (options.http) return await (await import("./serve_http.ts")).serveHttp(options);
  const httpOnly = (["port", "host", "token", "allowedHosts"] as const).filter((k) =>
    options[k] !== undefined
  );
  if (httpOnly.length) {
    const flag = httpOnly[0].replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    process.stderr.write(`codemode: --${flag} applies only with --http\n`);
    return 2;
  }
  const app = await startServeApp();
  const server = await app.mcpServer("stdio");
  const transport = new StdioServerTransport();

  let stopping: Promise<number> | undefined;
  const stop = (why: string) => {
    stopping ??= (async () => {
      log.info("shutting down", { why });
      await Promise.race([app.close(), new Promise((r) => setTimeout(r, 10_000))]);
      await server.close().catch(() => {});
      return 0;
    })();
    return stopping;
  };
  const done = new Promise<number>((resolve) => {
    process.once("SIGINT", () => resolve(stop("SIGINT")));
    process.once("SIGTERM", () => resolve(stop("SIGTERM")));
    process.stdin.once("end", () => resolve(stop("stdin closed")));
    process.stdin.once("close", () => resolve(stop("stdin closed")));
  });
  await server.connect(transport);
  const code = await done;
  // Exit explicitly: upstream child handles or timers must not keep a finished server alive.
  setTimeout(() => process.exit(code), 50).unref?.();
  return code;
}
