/**
 * Which servers codemode logs in to with OAuth, and their per-process OAuth state: a remote server
 * (Streamable HTTP or SSE) with a URL, unless its config already sends an `Authorization` header, which
 * is then used as it is.
 * @module
 */
import type { ServerSpec } from "../contracts/discovery.ts";
import { ServerAuth } from "./server_auth.ts";
import { TokenStore } from "./token_store.ts";

/** Whether the server's config sends its own `Authorization` header. */
export function sendsOwnAuthorization(spec: ServerSpec): boolean {
  return Object.keys(spec.headers ?? {}).some((name) => name.toLowerCase() === "authorization");
}

/** Whether codemode handles OAuth for the server. */
export function usesOAuth(spec: ServerSpec): boolean {
  return spec.transport !== "stdio" && Boolean(spec.url) && !sendsOwnAuthorization(spec);
}

/** The OAuth state of every server of one process, over one token store. */
export class OAuthClients {
  /** Where the credentials are kept. */
  readonly store: TokenStore;
  #byServer = new Map<string, ServerAuth>();

  /** Credentials under `dir` (CODEMODE_OAUTH_DIR; a fleet's nodes may share it), else `<stateDir>/oauth`. */
  constructor(stateDir: string, dir?: string) {
    this.store = new TokenStore(stateDir, dir);
  }

  /** The server's OAuth state, or undefined for a server codemode does not log in to. */
  forServer(spec: ServerSpec): ServerAuth | undefined {
    if (!usesOAuth(spec)) return undefined;
    let found = this.#byServer.get(spec.name);
    if (!found) this.#byServer.set(spec.name, found = new ServerAuth(spec, this.store));
    return found;
  }
}
