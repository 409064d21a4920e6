/**
 * `codemode auth login <server>`: the authorization-code flow with PKCE, driven by the SDK's `auth()`.
 * The SDK discovers the authorization server (protected resource metadata, then RFC 8414 or OIDC),
 * registers codemode dynamically unless the config names a client, sends the `resource` indicator, and
 * exchanges the code; codemode supplies the loopback redirect, the browser and the storage.
 * @module
 */
import { auth } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import { log } from "../observe/log.ts";
import { CallbackServer } from "./callback_server.ts";
import { sendsOwnAuthorization } from "./clients.ts";
import { registeredRedirect, StoredOAuthProvider } from "./oauth_provider.ts";
import { quietSdk } from "./sdk_warnings.ts";
import type { TokenStore } from "./token_store.ts";

/** How long a login waits for the browser by default. */
export const LOGIN_TIMEOUT_MS = 5 * 60_000;

/** Options of {@link login}. */
export interface LoginOptions {
  store: TokenStore;
  /** Sends the user to the authorization page (opens a browser, or prints the URL). */
  authorize(url: URL): unknown;
  /** Hears what the user should know while waiting (a refused redirect). */
  notice?: (message: string) => void;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** What a successful login obtained (never the tokens themselves). */
export interface LoginResult {
  server: string;
  scopes: string[];
  /** When the access token expires, if the server said. */
  expiresAt?: Date;
  refreshable: boolean;
}

/** Why a server cannot log in, or undefined when it can. */
export function loginRefusal(spec: ServerSpec): string | undefined {
  if (spec.transport === "stdio" || !spec.url) {
    return `MCP server "${spec.name}" is a local (stdio) server; only remote servers log in with OAuth`;
  }
  if (sendsOwnAuthorization(spec)) {
    return `MCP server "${spec.name}" already sends an Authorization header from its config, which codemode ` +
      `uses as it is; remove that header to log in with OAuth instead`;
  }
  return undefined;
}

/** Logs in to one remote server and stores its tokens. */
export async function login(spec: ServerSpec, options: LoginOptions): Promise<LoginResult> {
  const refusal = loginRefusal(spec);
  if (refusal) throw new Error(refusal);
  const { store } = options;
  let record = await store.read(spec.name, spec.url!);
  const hadRecord = Boolean(record);
  // A dynamically registered client keeps its redirect port when it is free (strict servers match it).
  const previous = !spec.oauth?.clientId ? portOf(registeredRedirect(record?.client)) : undefined;
  const callback = await startCallback(spec.oauth?.callbackPort, previous, options.notice);
  let browsing: Promise<unknown> = Promise.resolve();
  try {
    // Registered for another port: register again rather than hope the server allows any loopback port.
    if (record?.client && registeredRedirect(record.client) !== callback.url) {
      record = { ...record, client: undefined };
    }
    // The tokens held so far stay until new ones arrive: an abandoned login loses nothing.
    const provider = new StoredOAuthProvider({
      spec,
      store,
      record,
      redirectUrl: callback.url,
      // Not awaited: the "browser" may only finish once the callback has answered it, after the exchange.
      onAuthorize: (url) => {
        browsing = Promise.resolve().then(() => options.authorize(url));
      },
    });
    callback.expect(provider.expectedState);
    const note = (text: string) =>
      log.debug("oauth client note", { server: spec.name, note: text.slice(0, 500) });
    const started = await quietSdk(
      note,
      () =>
        auth(provider, {
          serverUrl: spec.url!,
          forceReauthorization: true,
          // Configured scopes beat the ones the metadata lists (the SDK prefers those to clientMetadata.scope).
          ...(spec.oauth?.scopes ? { scope: spec.oauth.scopes } : {}),
          fetchFn: fetch,
        }),
    );
    if (started === "REDIRECT") {
      // A browser step that fails (no launcher, an assertion in a test) ends the wait at once.
      const failed = browsing.then(() => new Promise<never>(() => {}));
      failed.catch(() => {}); // seen by the race below, or by `await browsing` later
      const answer = await Promise.race([
        callback.wait(options.timeoutMs ?? LOGIN_TIMEOUT_MS, options.signal),
        failed,
      ]);
      try {
        await quietSdk(note, () =>
          auth(provider, {
            serverUrl: spec.url!,
            authorizationCode: answer.code,
            ...(answer.iss ? { iss: answer.iss } : {}),
            fetchFn: fetch,
          }));
      } catch (error) {
        answer.finish(false, "codemode could not complete the login; see the terminal for why.");
        throw error;
      }
      answer.finish(true, `codemode is logged in to "${spec.name}". You can close this tab.`);
      await browsing;
    }
    const saved = provider.record;
    if (!saved.tokens) throw new Error(`The authorization server of "${spec.name}" issued no token`);
    log.info("oauth login complete", { server: spec.name });
    return {
      server: spec.name,
      scopes: saved.tokens.scope?.split(/\s+/).filter(Boolean) ?? [],
      ...(saved.expiresAt ? { expiresAt: new Date(saved.expiresAt) } : {}),
      refreshable: Boolean(saved.tokens.refresh_token),
    };
  } catch (error) {
    // A first login that failed leaves nothing behind (discovery results may have been saved on the way).
    if (!hadRecord) await store.remove(spec.name, spec.url!).catch(() => {});
    throw unreachable(error) ?? error;
  } finally {
    await callback.close();
  }
}

/** Listens on the configured port (which must be free), else the remembered one if free, else any. */
async function startCallback(
  configured: number | undefined,
  remembered: number | undefined,
  notice?: (m: string) => void,
): Promise<CallbackServer> {
  if (configured !== undefined || remembered === undefined) {
    return await CallbackServer.start(configured ?? 0, notice);
  }
  return await CallbackServer.start(remembered, notice).catch(() => CallbackServer.start(0, notice));
}

function portOf(url: string | undefined): number | undefined {
  if (!url) return undefined;
  try {
    const parsed = new URL(url);
    return parsed.hostname === "127.0.0.1" && parsed.port ? Number(parsed.port) : undefined;
  } catch {
    return undefined;
  }
}

/** A network failure, said as one: fetch's own messages do not say what was being reached. */
function unreachable(error: unknown): Error | undefined {
  const message = error instanceof Error ? error.message : String(error);
  if (
    !(error instanceof TypeError) &&
    !/ECONNREFUSED|ENOTFOUND|ETIMEDOUT|Unable to connect|fetch failed/i.test(message)
  ) {
    return undefined;
  }
  return new Error(
    `Cannot reach the server or its authorization server (${message.replace(/\s+/g, " ").slice(0, 200)}); ` +
      `check the server's URL and the network`,
    { cause: error },
  );
}
