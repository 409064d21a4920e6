/**
 * Prewarming over HTTP: a session's sandbox starts when its client has initialized
 * (`notifications/initialized`, the end of the 2025-era handshake; a stdio serve prewarms at once), so
 * the first `run_python` finds it ready or joins its start instead of paying for it. Whether to prewarm is the app's call (CODEMODE_PREWARM); the session manager
 * keeps it within the session cap and stops an unused one at the idle timeout.
 * @module
 */
import type { McpServer } from "@modelcontextprotocol/server";
import { log } from "../observe/log.ts";

/** Runs `start` once the client of `server` has initialized; a throwing `start` is logged, never fatal. */
export function whenInitialized(server: McpServer, start: () => void): void {
  const previous = server.server.oninitialized;
  server.server.oninitialized = () => {
    previous?.();
    try {
      start();
    } catch (error) {
      log.warn("prewarming the sandbox failed to begin", { error: String(error) });
    }
  };
}
