/**
 * `codemode auth logout <server>`: revokes the stored tokens where the authorization server offers a
 * revocation endpoint (RFC 7009; the SDK has discovery and client-authentication selection but no
 * revocation call, so the one POST is made here), then deletes everything stored for the server.
 * @module
 */
import {
  assertSecureTokenEndpoint,
  type AuthorizationServerMetadata,
  discoverOAuthServerInfo,
  selectClientAuthMethod,
  type StoredOAuthClientInformation,
} from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { log } from "../observe/log.ts";
import { StoredOAuthProvider } from "./oauth_provider.ts";
import type { TokenStore } from "./token_store.ts";

/** What a logout did. */
export interface LogoutResult {
  server: string;
  /** Whether anything was stored. */
  wasLoggedIn: boolean;
  /** Tokens the server confirmed revoked. */
  revoked: number;
  /** Why nothing was revoked, when nothing was. */
  notRevoked?: string;
}

/** Revokes (where supported) and deletes the stored credentials of one server. */
export async function logout(spec: ServerSpec, store: TokenStore, timeoutMs = 10_000): Promise<LogoutResult> {
  const record = spec.url ? await store.read(spec.name, spec.url) : undefined;
  if (!record) return { server: spec.name, wasLoggedIn: false, revoked: 0 };
  const tokens = [
    ...(record.tokens?.refresh_token ? [{ token: record.tokens.refresh_token, hint: "refresh_token" }] : []),
    ...(record.tokens?.access_token ? [{ token: record.tokens.access_token, hint: "access_token" }] : []),
  ];
  let revoked = 0;
  let notRevoked: string | undefined;
  const client = new StoredOAuthProvider({ spec, store, record }).clientInformation();
  try {
    if (!tokens.length) notRevoked = "no tokens were stored";
    else if (!client) notRevoked = "codemode's client registration was missing";
    else {
      const metadata = record.discovery?.authorizationServerMetadata ??
        (await discoverOAuthServerInfo(spec.url!, { fetchFn: timed(timeoutMs) })).authorizationServerMetadata;
      const endpoint = (metadata as { revocation_endpoint?: string } | undefined)?.revocation_endpoint;
      if (!endpoint) notRevoked = "its authorization server offers no revocation endpoint";
      else {
        for (const { token, hint } of tokens) {
          const status = await revoke(endpoint, token, hint, client, metadata!, timeoutMs);
          if (status === 200) revoked++;
          else notRevoked = `the revocation endpoint answered ${status}`;
        }
      }
    }
  } catch (error) {
    notRevoked = `revoking failed: ${(error as Error).message?.replace(/\s+/g, " ").slice(0, 200)}`;
  }
  await store.remove(spec.name, spec.url!);
  log.info("oauth logout", { server: spec.name, revoked });
  return { server: spec.name, wasLoggedIn: true, revoked, ...(notRevoked && !revoked ? { notRevoked } : {}) };
}

/** One RFC 7009 revocation request, authenticated the way the server accepts; the HTTP status. */
async function revoke(
  endpoint: string,
  token: string,
  hint: string,
  client: StoredOAuthClientInformation,
  metadata: AuthorizationServerMetadata,
  timeoutMs: number,
): Promise<number> {
  const url = assertSecureTokenEndpoint(endpoint);
  const supported = (metadata as { revocation_endpoint_auth_methods_supported?: string[] })
    .revocation_endpoint_auth_methods_supported ?? metadata.token_endpoint_auth_methods_supported ?? [];
  const body = new URLSearchParams({ token, token_type_hint: hint });
  const headers = new Headers({
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  });
  const secret = (client as { client_secret?: string }).client_secret;
  const method = selectClientAuthMethod(client, supported);
  if (method === "client_secret_basic" && secret) {
    headers.set(
      "authorization",
      `Basic ${btoa(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(secret)}`)}`,
    );
  } else {
    body.set("client_id", client.client_id);
    if (method === "client_secret_post" && secret) body.set("client_secret", secret);
  }
  const response = await timed(timeoutMs)(url, { method: "POST", headers, body });
  await response.body?.cancel();
  return response.status;
}

/** `fetch` that gives up after `ms`. */
function timed(ms: number): typeof fetch {
  return (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(ms) });
}
