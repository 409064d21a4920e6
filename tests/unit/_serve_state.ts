/**
 * A serve's published state for dashboard tests: an idle stdio serve of this process, with whatever a
 * test adds (servers, approvals, artifact sessions).
 * @module
 */
import type { ServeState } from "../../core/observe/serve_state.ts";

/** This process as an idle stdio serve, with `overrides` on top. */
export function idleServeState(overrides: Partial<ServeState> = {}): ServeState {
  return {
    pid: process.pid,
    version: "test",
    transport: "stdio",
    startedAt: new Date(0).toISOString(),
    cwd: "/work",
    clients: [],
    sessions: [],
    servers: [],
    policy: { open: true, rules: {}, sources: {} },
    metrics: [],
    ...overrides,
  };
}
