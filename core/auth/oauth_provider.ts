/**
 * codemode's `OAuthClientProvider`: the persistence the SDK's `auth()` asks for (client registration,
 * tokens, discovery results) backed by the token store, plus the PKCE verifier and `state` of a login in
 * progress, held in memory. The SDK does the protocol: discovery, registration, PKCE, the token requests.
 *
 * Two modes: interactive (`auth login`: `redirectToAuthorization` hands the URL to the browser) and
 * headless (`serve`: a refresh that would need the browser raises NeedsLoginError instead).
 * @module
 */
import { randomBytes } from "node:crypto";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { NeedsLoginError } from "./needs_login.ts";
import type { StoredAuth, TokenStore } from "./token_store.ts";

/** The client name codemode registers under. */
export const CLIENT_NAME = "codemode";
/** The path of the loopback redirect. */
export const CALLBACK_PATH = "/callback";
/** The redirect a headless provider names: never visited, since it never starts an authorization. */
const HEADLESS_REDIRECT = `http://127.0.0.1${CALLBACK_PATH}`;

/** How a provider is built. */
export interface ProviderOptions {
  spec: ServerSpec;
  store: TokenStore;
  /** The stored record to start from (a new one when the server has none). */
  record?: StoredAuth;
  /** The loopback redirect of an interactive login. */
  redirectUrl?: string;
  /** Sends the user to the authorization URL; without it the provider is headless. */
  onAuthorize?: (url: URL) => void | Promise<void>;
}

/** An `OAuthClientProvider` for one server, persisting to the token store. */
export class StoredOAuthProvider implements OAuthClientProvider {
  /** The record as last read or written. */
  record: StoredAuth;
  /** What `auth()` invalidated since this list was last emptied: how a refresh failed. */
  readonly invalidated: string[] = [];
  readonly #spec: ServerSpec;
  readonly #store: TokenStore;
  readonly #redirectUrl: string;
  readonly #onAuthorize?: (url: URL) => void | Promise<void>;
  readonly #state = randomBytes(32).toString("base64url");
  #verifier?: string;
  /** The issuer stamp of a configured client, kept in memory: the config is not ours to rewrite. */
  #configuredIssuer?: string;

  constructor(options: ProviderOptions) {
    this.#spec = options.spec;
    this.#store = options.store;
    this.record = options.record ?? { version: 1, server: options.spec.name, serverUrl: options.spec.url! };
    this.#onAuthorize = options.onAuthorize;
    this.#redirectUrl = options.redirectUrl ?? registeredRedirect(this.record.client) ?? HEADLESS_REDIRECT;
  }

  /** The loopback URL the authorization server sends the browser back to. */
  get redirectUrl(): string {
    return this.#redirectUrl;
  }

  /** What codemode registers as: a native app with a loopback redirect that refreshes its tokens. */
  get clientMetadata(): OAuthClientMetadata {
    const oauth = this.#spec.oauth;
    return {
      client_name: CLIENT_NAME,
      redirect_uris: [this.#redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: oauth?.clientSecret ? "client_secret_post" : "none",
      ...(oauth?.scopes ? { scope: oauth.scopes } : {}),
    };
  }

  /** The `state` this login sent; the callback must bring it back. */
  state(): string {
    return this.#state;
  }

  /** The state a callback must carry. */
  get expectedState(): string {
    return this.#state;
  }

  /** The configured client, else the one registered dynamically. */
  clientInformation(): StoredOAuthClientInformation | undefined {
    const oauth = this.#spec.oauth;
    if (oauth?.clientId) {
      const client: OAuthClientInformationMixed = {
        client_id: oauth.clientId,
        ...(oauth.clientSecret ? { client_secret: oauth.clientSecret } : {}),
      };
      return { ...client, ...(this.#configuredIssuer ? { issuer: this.#configuredIssuer } : {}) };
    }
    return this.record.client;
  }

  /** Keeps a dynamic registration (configured clients only get their issuer stamp, in memory). */
  async saveClientInformation(client: StoredOAuthClientInformation): Promise<void> {
    if (this.#spec.oauth?.clientId) {
      this.#configuredIssuer = client.issuer;
      return;
    }
    await this.#save({ ...this.record, client });
  }

  /** The stored tokens. */
  tokens(): StoredOAuthTokens | undefined {
    return this.record.tokens;
  }

  /** Stores new tokens with their absolute expiry (the SDK gives `expires_in`, relative to now). */
  async saveTokens(tokens: StoredOAuthTokens): Promise<void> {
    const now = Date.now();
    await this.#save({
      ...this.record,
      tokens,
      obtainedAt: now,
      expiresAt: typeof tokens.expires_in === "number" ? now + tokens.expires_in * 1000 : undefined,
    });
  }

  /** Interactive: opens the browser. Headless: a login is needed, which only the user can do. */
  async redirectToAuthorization(url: URL): Promise<void> {
    if (!this.#onAuthorize) {
      throw new NeedsLoginError(
        this.#spec.name,
        "its authorization server wants the user to authorize again",
      );
    }
    await this.#onAuthorize(url);
  }

  /** Keeps the PKCE verifier for the code exchange that follows the redirect. */
  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }

  /** The PKCE verifier of this login. */
  codeVerifier(): string {
    if (!this.#verifier) throw new Error("No login is in progress: there is no PKCE code verifier");
    return this.#verifier;
  }

  /** Keeps discovery results with the tokens, so a refresh does not rediscover. */
  async saveDiscoveryState(state: OAuthDiscoveryState): Promise<void> {
    await this.#save({ ...this.record, discovery: state });
  }

  /** The stored discovery results. */
  discoveryState(): OAuthDiscoveryState | undefined {
    return this.record.discovery;
  }

  /** Remembers the resource indicator the tokens are for. */
  async saveResourceUrl(resource: string): Promise<void> {
    if (resource !== this.record.resource) await this.#save({ ...this.record, resource });
  }

  /** The resource indicator the tokens are for. */
  resourceUrl(): string | undefined {
    return this.record.resource;
  }

  /** Drops what the authorization server said is no longer valid. */
  async invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): Promise<void> {
    this.invalidated.push(scope);
    if (scope === "verifier") return void (this.#verifier = undefined);
    if (scope === "tokens") {
      // Another codemode may have refreshed meanwhile (the one refresh token we held is then spent):
      // its tokens are good, so take them instead of deleting them.
      const current = await this.#store.read(this.record.server, this.record.serverUrl);
      const theirs = current?.tokens?.refresh_token ?? current?.tokens?.access_token;
      if (
        current && theirs &&
        theirs !== (this.record.tokens?.refresh_token ?? this.record.tokens?.access_token)
      ) {
        this.record = current;
        return;
      }
    }
    const next = { ...this.record };
    if (scope === "all" || scope === "tokens") {
      delete next.tokens;
      delete next.obtainedAt;
      delete next.expiresAt;
    }
    if (scope === "all" || scope === "client") delete next.client;
    if (scope === "all" || scope === "discovery") delete next.discovery;
    await this.#save(next);
  }

  async #save(record: StoredAuth): Promise<void> {
    this.record = record;
    await this.#store.write(record);
  }
}

/** The loopback redirect a dynamically registered client was registered with. */
export function registeredRedirect(client: StoredOAuthClientInformation | undefined): string | undefined {
  const uris = (client as { redirect_uris?: unknown } | undefined)?.redirect_uris;
  return Array.isArray(uris) && typeof uris[0] === "string" ? uris[0] : undefined;
}
