/**
 * The checks every HTTP request to `codemode serve --http` passes before it reaches MCP: the Host and
 * Origin headers (a web page must not reach a local server through DNS rebinding or a cross-site
 * request) and the bearer token when one is set. A server that runs code with the user's MCP servers
 * must refuse anything it cannot place.
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { validateHostHeader, validateOriginHeader } from "@modelcontextprotocol/server";

/** Hostnames that name this machine's loopback interface, as they appear in Host and Origin headers. */
export const LOOPBACK_HOSTNAMES: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

/** What a request is checked against. */
export interface GuardOptions {
  /** Hostnames the Host and Origin headers may name; undefined accepts any Host (wildcard bind). */
  allowedHosts?: readonly string[];
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  token?: string;
}

/** Why a request was refused: the HTTP status, a message for the client, and extra headers. */
export interface Refusal {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** The request headers the guard reads. */
export interface GuardedHeaders {
  host?: string | null;
  origin?: string | null;
  authorization?: string | null;
}

/** Whether `host` (as given to `--host`) listens on every interface. */
export function isWildcardHost(host: string): boolean {
  return host === "" || host === "0.0.0.0" || host === "::" || host === "[::]";
}

/** Whether `host` (as given to `--host`) is a loopback address or name. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  return bare === "localhost" || bare === "::1" || (isIP(bare) === 4 && bare.startsWith("127."));
}

/**
 * The Host/Origin allow-list for a server bound to `host`: loopback names, the bound name itself, and the
 * names a balancer forwards (`--allowed-hosts`). A wildcard bind without such names accepts any Host.
 */
export function allowedHostsFor(host: string, names: readonly string[] = []): string[] | undefined {
  const wildcard = isWildcardHost(host);
  if (wildcard && !names.length) return undefined;
  const bound = wildcard ? [] : [isIP(host) === 6 ? `[${host}]` : host.toLowerCase()];
  return [...new Set([...LOOPBACK_HOSTNAMES, ...bound, ...names.map((n) => n.toLowerCase())])];
}

/** Checks one request; returns why it is refused, or undefined when it may proceed. */
export function guardRequest(headers: GuardedHeaders, options: GuardOptions): Refusal | undefined {
  if (options.allowedHosts) {
    const host = validateHostHeader(headers.host, [...options.allowedHosts]);
    if (!host.ok) {
      return {
        status: 403,
        message: `Refused Host "${headers.host ?? ""}": this server answers only to ${
          options.allowedHosts.join(", ")
        }`,
      };
    }
  }
  // Browsers send Origin on cross-site requests; other clients send none, which passes.
  const origin = validateOriginHeader(headers.origin, [...(options.allowedHosts ?? LOOPBACK_HOSTNAMES)]);
  if (!origin.ok) {
    return {
      status: 403,
      message: `Refused Origin "${headers.origin}": cross-site requests are not allowed`,
    };
  }
  if (options.token !== undefined && !tokenMatches(headers.authorization, options.token)) {
    return {
      status: 401,
      message: "Missing or wrong bearer token: send Authorization: Bearer <token>",
      headers: { "WWW-Authenticate": 'Bearer realm="codemode"' },
    };
  }
  return undefined;
}

function tokenMatches(authorization: string | null | undefined, token: string): boolean {
  const match = /^Bearer\s+(.+)$/i.exec(authorization?.trim() ?? "");
  if (!match) return false;
  // Equal-length digests, so the comparison's time says nothing about the token.
  const digest = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(digest(match[1]), digest(token));
}
