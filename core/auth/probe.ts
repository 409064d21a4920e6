/**
 * Whether a remote server needs a login, found out the cheap way: one request (an MCP `initialize` for
 * Streamable HTTP, the event-stream GET for SSE) with the stored token if there is one. A 401 means
 * "needs login" (after one refresh, for a stored token); any other answer means the token, or no token,
 * is accepted. `codemode servers` and `doctor --quick` use it; the session it may open is ended at once.
 * @module
 */
import { DEFAULT_NEGOTIATED_PROTOCOL_VERSION } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { NeedsLoginError } from "./needs_login.ts";
import type { AuthState, ServerAuth } from "./server_auth.ts";

/** What a probe found. */
export interface AuthProbe {
  auth: AuthState;
  /** Why the server could not be asked, or what it said instead of answering. */
  problem?: string;
}

/** Probes one remote server; `auth` is its OAuth state (undefined: codemode does no OAuth for it). */
export async function probeAuth(
  spec: ServerSpec,
  serverAuth: ServerAuth | undefined,
  timeoutMs = 5_000,
): Promise<AuthProbe> {
  if (!serverAuth || !spec.url) return { auth: "none" };
  try {
    let token = await serverAuth.token();
    let response = await ask(spec, serverAuth, token, timeoutMs);
    if (response.status === 401) {
      await serverAuth.onUnauthorized({ response, serverUrl: new URL(spec.url), fetchFn: serverAuth.fetch });
      token = await serverAuth.token();
      response = await ask(spec, serverAuth, token, timeoutMs);
      if (response.status === 401) {
        return { auth: "needs-login", problem: (await serverAuth.refusedAfterRefresh()).message };
      }
    }
    return {
      auth: token ? "logged-in" : "none",
      ...(response.status >= 400 ? { problem: `it answered HTTP ${response.status}` } : {}),
    };
  } catch (error) {
    if (error instanceof NeedsLoginError) return { auth: "needs-login", problem: error.message };
    const reason = error instanceof Error ? error.message : String(error);
    return {
      auth: serverAuth.state(),
      problem: `it could not be reached: ${reason.replace(/\s+/g, " ").slice(0, 200)}`,
    };
  }
}

async function ask(spec: ServerSpec, serverAuth: ServerAuth, token: string | undefined, timeoutMs: number) {
  const headers = new Headers(spec.headers ?? {});
  if (token) headers.set("authorization", `Bearer ${token}`);
  const signal = AbortSignal.timeout(timeoutMs);
  if (spec.transport === "sse") {
    headers.set("accept", "text/event-stream");
    const response = await serverAuth.fetch(spec.url!, { headers, signal });
    await response.body?.cancel();
    return response;
  }
  headers.set("content-type", "application/json");
  headers.set("accept", "application/json, text/event-stream");
  const response = await serverAuth.fetch(spec.url!, {
    method: "POST",
    headers,
    signal,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: DEFAULT_NEGOTIATED_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "codemode-probe", version: "1" },
      },
    }),
  });
  await response.body?.cancel();
  const session = response.headers.get("mcp-session-id");
  if (session) {
    headers.set("mcp-session-id", session);
    await serverAuth.fetch(spec.url!, { method: "DELETE", headers, signal: AbortSignal.timeout(timeoutMs) })
      .then((r) => r.body?.cancel(), () => {});
  }
  return response;
}
