/**
 * Who may see the dashboard. `codemode ui` prints a one-time login code: opening `/?login=<code>` sets a
 * session cookie (HttpOnly, SameSite=Strict) and redirects to `/`, after which the code is dead.
 * `serve --http` with a token accepts it as `Authorization: Bearer <token>` on any request, or once in
 * `/?token=<token>`, which sets the same cookie and redirects (so the token leaves the address bar).
 * Without a token, `serve --http` is open to whoever may reach it, like its `/mcp` endpoint.
 * @module
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** Sessions kept at most; the oldest is forgotten first. */
const MAX_SESSIONS = 64;

/** How a dashboard authenticates requests. */
export interface DashboardAuthOptions {
  /** The bearer token of `serve --http` (or `codemode ui --token`). */
  token?: string;
  /** Print-once login codes (codemode ui). */
  loginCode?: boolean;
  /** Name of the session cookie (cookies are shared by every port of a host, so it names the port). */
  cookieName: string;
}

/** What a request carries that the checks read. */
export interface Credentials {
  cookie?: string | null;
  authorization?: string | null;
}

/** The dashboard's login codes, tokens and session cookies. */
export class DashboardAuth {
  readonly cookieName: string;
  #token?: string;
  #code?: string;
  #open: boolean;
  #sessions = new Set<string>();

  /** Makes a login code now when `loginCode` is set. */
  constructor(options: DashboardAuthOptions) {
    this.cookieName = options.cookieName;
    this.#token = options.token;
    if (options.loginCode) this.#code = secret();
    this.#open = options.token === undefined && !options.loginCode;
  }

  /** True when nothing is required: no token and no login code (serve --http without a token). */
  get open(): boolean {
    return this.#open;
  }

  /** The login code, until it is used; undefined after. */
  get loginCode(): string | undefined {
    return this.#code;
  }

  /** Whether the request carries a valid session cookie or bearer token (or nothing is required). */
  allows(credentials: Credentials): boolean {
    if (this.open) return true;
    if (this.#token !== undefined && bearerMatches(credentials.authorization, this.#token)) return true;
    const session = cookieValue(credentials.cookie, this.cookieName);
    return session !== undefined && this.#sessions.has(session);
  }

  /** Consumes the login code if `code` is it; returns a new session id, or undefined. */
  login(code: string): string | undefined {
    if (this.#code === undefined || !equal(code, this.#code)) return undefined;
    this.#code = undefined;
    return this.#newSession();
  }

  /** Starts a session for a request that showed the token in the address; undefined when it is wrong. */
  loginWithToken(token: string): string | undefined {
    if (this.#token === undefined || !equal(token, this.#token)) return undefined;
    return this.#newSession();
  }

  /** The Set-Cookie header value for a session. */
  cookie(session: string): string {
    return `${this.cookieName}=${session}; HttpOnly; SameSite=Strict; Path=/`;
  }

  #newSession(): string {
    const session = secret();
    this.#sessions.add(session);
    if (this.#sessions.size > MAX_SESSIONS) this.#sessions.delete(this.#sessions.values().next().value!);
    return session;
  }
}

/** A random, URL-safe secret of 256 bits. */
function secret(): string {
  return randomBytes(32).toString("base64url");
}

/** Compares in constant time (digests of equal length, so the time says nothing about the secret). */
function equal(given: string, expected: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

function bearerMatches(authorization: string | null | undefined, token: string): boolean {
  const match = /^Bearer\s+(.+)$/i.exec(authorization?.trim() ?? "");
  return match !== null && equal(match[1], token);
}

/** The value of cookie `name` in a Cookie header. */
export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
