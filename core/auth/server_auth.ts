/**
 * The OAuth side of one remote server while codemode uses it: the `AuthProvider` its transport asks for
 * a bearer token before every request and calls back on a 401. Tokens are refreshed shortly before they
 * expire and after a 401, once; concurrent calls share one refresh. A refresh the authorization server
 * refuses, a 401 with nothing to refresh, or a 401 for the refreshed token marks the server "needs
 * login": every later call fails at once with NeedsLoginError, without touching the network, until the
 * stored credentials change (the user ran `codemode auth login`, possibly while this process runs).
 * @module
 */
import {
  auth,
  type AuthProvider,
  extractWWWAuthenticateParams,
  type FetchLike,
} from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { log } from "../observe/log.ts";
import { NeedsLoginError } from "./needs_login.ts";
import { StoredOAuthProvider } from "./oauth_provider.ts";
import { quietSdk } from "./sdk_warnings.ts";
import type { StoredAuth, TokenStore } from "./token_store.ts";

/** Whether a remote server needs nothing, has working credentials, or needs `codemode auth login`. */
export type AuthState = "none" | "logged-in" | "needs-login";

/** A refresh starts 10% of the token's lifetime before expiry, at least this early (latency)... */
export const MIN_REFRESH_MARGIN_MS = 1_000;
/** ...and at most this early. */
export const MAX_REFRESH_MARGIN_MS = 60_000;
/** After a refresh failed for a reason the server did not state (network, 5xx), retry no sooner. */
export const RETRY_AFTER_FAILED_REFRESH_MS = 30_000;
/** Token values remembered for redaction (current and earlier ones). */
const REMEMBERED_SECRETS = 64;

interface Block {
  error: NeedsLoginError;
  /** The store's stamp when the block was set: a new login changes it. */
  stamp: string;
  /** For failures the server did not explain: when to try again. */
  until?: number;
}

/** Per-server OAuth state for the upstream transport; one per server per process. */
export class ServerAuth implements AuthProvider {
  /** The server's configured name. */
  readonly server: string;
  readonly #spec: ServerSpec;
  readonly #store: TokenStore;
  readonly #now: () => number;
  #provider?: StoredOAuthProvider;
  #loading?: Promise<StoredOAuthProvider>;
  #refreshing?: Promise<void>;
  #block?: Block;
  #secrets: string[] = [];
  /** The bearer token each response answered, so a late 401 for an old token does not refresh again. */
  #sent = new WeakMap<Response, string | null>();

  constructor(spec: ServerSpec, store: TokenStore, options: { now?: () => number } = {}) {
    if (!spec.url) throw new TypeError(`MCP server "${spec.name}" has no URL to log in to`);
    this.server = spec.name;
    this.#spec = spec;
    this.#store = store;
    this.#now = options.now ?? Date.now;
    if (spec.oauth?.clientSecret) this.#remember(spec.oauth.clientSecret);
  }

  /** `fetch` for the transport: it notes which bearer token each response answered. */
  readonly fetch: FetchLike = async (url, init) => {
    const response = await fetch(url, init);
    const header = new Headers(init?.headers).get("authorization");
    this.#sent.set(response, header && /^bearer /i.test(header) ? header.slice(7) : null);
    return response;
  };

  /** The access token to send, refreshed first when it is about to expire; undefined when there is none. */
  async token(): Promise<string | undefined> {
    const provider = await this.#usable();
    const record = provider.record;
    if (!record.tokens) return undefined;
    if (record.tokens.refresh_token && this.#expiring(record)) await this.#refresh();
    return this.#provider!.record.tokens?.access_token;
  }

  /** The server refused a request with 401: refresh once (shared by concurrent callers), or need a login. */
  async onUnauthorized(context: Parameters<NonNullable<AuthProvider["onUnauthorized"]>>[0]): Promise<void> {
    const provider = await this.#usable();
    const sent = this.#sent.get(context.response);
    const current = provider.record.tokens?.access_token;
    // New tokens arrived since that request went out: the transport's retry carries them.
    if (sent !== undefined && current !== undefined && (sent ?? undefined) !== current) return;
    if (this.#refreshing) return await this.#refreshing;
    if (!provider.record.tokens) {
      throw await this.#blockWith(
        new NeedsLoginError(
          this.server,
          "it requires OAuth authorization and codemode holds no token for it",
        ),
      );
    }
    if (!provider.record.tokens.refresh_token) {
      throw await this.#blockWith(
        new NeedsLoginError(this.server, "it refused the access token and there is no refresh token"),
      );
    }
    const { resourceMetadataUrl } = extractWWWAuthenticateParams(context.response);
    await this.#refresh(resourceMetadataUrl);
  }

  /**
   * The server answered 401 again after the transport re-authenticated (the SDK's "Server returned 401
   * after re-authentication"): it refuses even a token just refreshed, so the grant is of no use to it and
   * refreshing again would only repeat that. As after a refused refresh, the tokens are dropped and the
   * server needs a login. Returns the error to raise.
   */
  async refusedAfterRefresh(): Promise<NeedsLoginError> {
    if (this.#block && !this.#retryDue()) return this.#block.error;
    const provider = await this.#load();
    const held = provider.record.tokens?.access_token;
    await provider.invalidateCredentials("tokens");
    const error = new NeedsLoginError(this.server, "it refused even a freshly refreshed access token");
    // Another codemode process stored other tokens meanwhile (a new login): the next call tries them.
    if (provider.record.tokens && provider.record.tokens.access_token !== held) {
      this.#rememberTokens(provider.record);
      return error;
    }
    return await this.#blockWith(error);
  }

  /** Throws NeedsLoginError at once while the server needs a login and its credentials are unchanged. */
  async ensureUsable(): Promise<void> {
    await this.#usable();
  }

  /** What is known without asking the server. */
  state(): AuthState {
    if (this.#block && !this.#retryDue()) return "needs-login";
    return this.#provider?.record.tokens ? "logged-in" : "none";
  }

  /** Every credential value this process has held for the server: never to be shown anywhere. */
  secrets(): readonly string[] {
    return this.#secrets;
  }

  /** Loads the stored record (once), and lifts a block when the credentials changed or a retry is due. */
  async #usable(): Promise<StoredOAuthProvider> {
    const provider = await this.#load();
    const block = this.#block;
    if (!block) return provider;
    if (this.#retryDue()) {
      this.#block = undefined;
      return provider;
    }
    if (await this.#store.stamp(this.server, this.#spec.url!) === block.stamp) throw block.error;
    this.#block = undefined;
    return await this.#reload();
  }

  #load(): Promise<StoredOAuthProvider> {
    if (this.#provider) return Promise.resolve(this.#provider);
    this.#loading ??= this.#reload().finally(() => (this.#loading = undefined));
    return this.#loading;
  }

  async #reload(): Promise<StoredOAuthProvider> {
    const record = await this.#store.read(this.server, this.#spec.url!);
    this.#provider = new StoredOAuthProvider({ spec: this.#spec, store: this.#store, record });
    this.#rememberTokens(this.#provider.record);
    return this.#provider;
  }

  #expiring(record: StoredAuth): boolean {
    if (record.expiresAt === undefined) return false;
    const lifetime = record.expiresAt - (record.obtainedAt ?? record.expiresAt);
    // Never more than half the lifetime, so a short-lived token is still used before it is replaced.
    const margin = Math.min(
      MAX_REFRESH_MARGIN_MS,
      Math.max(MIN_REFRESH_MARGIN_MS, lifetime * 0.1),
      lifetime / 2,
    );
    return this.#now() >= record.expiresAt - margin;
  }

  #refresh(resourceMetadataUrl?: URL): Promise<void> {
    this.#refreshing ??= this.#doRefresh(resourceMetadataUrl).finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  /** One refresh at a time across every codemode sharing the token folder (see TokenStore.locked). */
  #doRefresh(resourceMetadataUrl?: URL): Promise<void> {
    return this.#store.locked(this.server, this.#spec.url!, () => this.#refreshLocked(resourceMetadataUrl));
  }

  async #refreshLocked(resourceMetadataUrl?: URL): Promise<void> {
    const held = this.#provider!.record.tokens;
    // Another codemode process may have refreshed already: its tokens are in the file.
    const stored = await this.#store.read(this.server, this.#spec.url!);
    if (stored?.tokens && stored.tokens.access_token !== held?.access_token && !this.#expiring(stored)) {
      this.#provider = new StoredOAuthProvider({ spec: this.#spec, store: this.#store, record: stored });
      this.#rememberTokens(stored);
      log.info("oauth tokens taken from another codemode process", { server: this.server });
      return;
    }
    const provider = this.#provider!;
    if (!provider.clientInformation()) {
      throw await this.#blockWith(
        new NeedsLoginError(this.server, "codemode's client registration for it is missing"),
      );
    }
    const notes: string[] = [];
    provider.invalidated.length = 0;
    try {
      await quietSdk(
        (note) => notes.push(this.#scrub(note)),
        () => auth(provider, { serverUrl: this.#spec.url!, resourceMetadataUrl, fetchFn: this.fetch }),
      );
      this.#rememberTokens(provider.record);
      const expiresIn = provider.record.expiresAt &&
        Math.round((provider.record.expiresAt - this.#now()) / 1000);
      log.info("oauth tokens refreshed", { server: this.server, expiresInS: expiresIn });
    } catch (error) {
      this.#rememberTokens(provider.record);
      for (const note of notes) {
        log.debug("oauth client note", { server: this.server, note: note.slice(0, 500) });
      }
      const refused = provider.invalidated.includes("tokens") || provider.invalidated.includes("client");
      throw await this.#blockWith(this.#refreshFailure(error, provider.invalidated, notes), refused);
    }
  }

  /** Why a refresh failed, as the user should hear it. */
  #refreshFailure(error: unknown, invalidated: string[], notes: string[]): NeedsLoginError {
    if (invalidated.includes("client")) {
      return new NeedsLoginError(
        this.server,
        "its authorization server no longer accepts codemode's client registration",
      );
    }
    if (invalidated.includes("tokens")) {
      return new NeedsLoginError(
        this.server,
        "its authorization server refused the refresh token (it expired or was revoked)",
      );
    }
    const detail = error instanceof NeedsLoginError
      ? notes.at(-1)?.replace(/^\[mcp-sdk\]\s*/, "")
      : this.#scrub(error instanceof Error ? error.message : String(error));
    return new NeedsLoginError(
      this.server,
      `refreshing its OAuth tokens failed${detail ? ` (${detail.replace(/\s+/g, " ").slice(0, 300)})` : ""}`,
    );
  }

  /**
   * Marks the server as needing a login. A refusal stands until the stored credentials change; a failure
   * the server did not explain (network, 5xx) is retried after a pause.
   */
  async #blockWith(error: NeedsLoginError, lasting = true): Promise<NeedsLoginError> {
    this.#block = {
      error,
      stamp: await this.#store.stamp(this.server, this.#spec.url!),
      ...(lasting ? {} : { until: this.#now() + RETRY_AFTER_FAILED_REFRESH_MS }),
    };
    log.warn("oauth login needed", { server: this.server, reason: error.message });
    return error;
  }

  #retryDue(): boolean {
    return this.#block?.until !== undefined && this.#now() >= this.#block.until;
  }

  #rememberTokens(record: StoredAuth): void {
    const tokens = record.tokens;
    if (tokens?.access_token) this.#remember(tokens.access_token);
    if (tokens?.refresh_token) this.#remember(tokens.refresh_token);
    const secret = (record.client as { client_secret?: string } | undefined)?.client_secret;
    if (secret) this.#remember(secret);
  }

  #remember(value: string): void {
    if (this.#secrets.includes(value)) return;
    this.#secrets = [value, ...this.#secrets].slice(0, REMEMBERED_SECRETS);
  }

  /** `text` without any credential this process holds for the server. */
  #scrub(text: string): string {
    let out = text;
    for (const secret of this.#secrets) if (secret.length >= 6) out = out.replaceAll(secret, "[redacted]");
    return out;
  }
}
