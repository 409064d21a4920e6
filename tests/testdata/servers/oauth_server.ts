/**
 * An OAuth-protected MCP server on loopback, for the OAuth tests: an authorization server (the v1 SDK's
 * `mcpAuthRouter` on express, with dynamic client registration, PKCE, refresh-token rotation and
 * revocation) and, on another port, a resource server (v2 server SDK: `createMcpHandler` behind
 * `requireBearerAuth`, which checks each token and its audience).
 *
 * Resources, each with its own protected resource metadata (RFC 9728):
 *   /mcp          the protected MCP server (tools echo, whoami, fail, auth_error)
 *   /other/mcp    a second protected MCP server: its tokens are refused at /mcp (another audience)
 *   /evil/mcp     a server whose metadata claims to be /mcp (a client must refuse to log in for it)
 *
 * The authorize endpoint answers with an approval page; following its `approve` link redirects the
 * browser to the client's callback with the code, as a person clicking "Approve" would.
 *
 * Run standalone: `deno run -A tests/testdata/servers/oauth_server.ts [--ttl=SECONDS]` prints the URLs.
 * @module
 */
import express from "express";
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
// The v1 SDK's subpath exports map types to "*.js.d.ts", which do not exist: name the files.
// @ts-types="../../../node_modules/@modelcontextprotocol/sdk/dist/esm/server/auth/router.d.ts"
import { createOAuthMetadata, mcpAuthRouter } from "@modelcontextprotocol/sdk/server/auth/router.js";
// @ts-types="../../../node_modules/@modelcontextprotocol/sdk/dist/esm/server/auth/errors.d.ts"
import { InvalidGrantError, InvalidTokenError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { OAuthClientInformationFull } from "../../../node_modules/@modelcontextprotocol/sdk/dist/esm/shared/auth.d.ts";
import {
  type AuthInfo,
  createMcpHandler,
  getOAuthProtectedResourceMetadataUrl,
  McpServer,
  OAuthError,
  OAuthErrorCode,
  oauthMetadataResponse,
  requireBearerAuth,
} from "@modelcontextprotocol/server";
import * as z from "zod";

/** Options of {@link startOAuthServer}. */
export interface OAuthServerOptions {
  /** Access-token lifetime in seconds (default 3600). */
  accessTokenTtl?: number;
  /** Scopes the resource advertises (default `mcp:read mcp:write`). */
  scopes?: string[];
}

/** What the server did so far. */
export interface OAuthCounts {
  registrations: number;
  authorizations: number;
  codeExchanges: number;
  refreshes: number;
  refreshFailures: number;
  revocations: number;
  mcpRequests: number;
  unauthorized: number;
}

/** A running OAuth-protected MCP server. */
export interface OAuthTestServer {
  /** The authorization server's issuer URL. */
  issuer: string;
  /** The protected MCP endpoint. */
  mcpUrl: string;
  /** A second protected MCP endpoint (another audience). */
  otherUrl: string;
  /** An endpoint whose protected resource metadata names `mcpUrl` as its resource. */
  evilUrl: string;
  counts: OAuthCounts;
  /** Every access and refresh token issued so far. */
  issued(): string[];
  /** Every state value the authorize endpoint received. */
  states(): string[];
  /** Every request to an MCP endpoint: its method, path and the bearer token it carried (null: none). */
  requests(): { method: string; path: string; token: string | null }[];
  /** Makes every access token expired now (the next use gets 401); minted ones are spared. */
  expireAccessTokens(): void;
  /** Forgets every access token, as a server that revoked them would; minted ones are spared. */
  revokeAccessTokens(): void;
  /** Forgets every refresh token: the next refresh fails with invalid_grant. */
  revokeRefreshTokens(): void;
  /**
   * While on, the resource server refuses every access token, fresh ones too, as a server does whose
   * user lost access to it; the authorization server still issues and refreshes tokens. Minted ones pass.
   */
  rejectAllTokens(on?: boolean): void;
  /** Changes the lifetime of access tokens issued from now on. */
  setAccessTokenTtl(seconds: number): void;
  /** Issues an access token for `resource` directly (for audience tests). */
  mint(resource: string): string;
  close(): Promise<void>;
}

interface Grant {
  clientId: string;
  scopes: string[];
  resource?: string;
}

interface AccessToken extends Grant {
  expiresAt: number;
  /** Issued by `mint()`, outside any grant. */
  minted?: boolean;
}

/** Starts both servers on 127.0.0.1, on free ports. */
export async function startOAuthServer(options: OAuthServerOptions = {}): Promise<OAuthTestServer> {
  let ttl = options.accessTokenTtl ?? 3600;
  const scopes = options.scopes ?? ["mcp:read", "mcp:write"];
  const counts: OAuthCounts = {
    registrations: 0,
    authorizations: 0,
    codeExchanges: 0,
    refreshes: 0,
    refreshFailures: 0,
    revocations: 0,
    mcpRequests: 0,
    unauthorized: 0,
  };
  const clients = new Map<string, OAuthClientInformationFull>();
  const pending = new Map<string, { client: OAuthClientInformationFull; params: AuthorizeParams }>();
  const codes = new Map<string, { client: OAuthClientInformationFull; params: AuthorizeParams }>();
  const accessTokens = new Map<string, AccessToken>();
  const refreshTokens = new Map<string, Grant>();
  const issued: string[] = [];
  const states: string[] = [];
  const requests: { method: string; path: string; token: string | null }[] = [];
  let rejectingAll = false;

  const secret = (prefix: string) => `${prefix}_${randomBytes(24).toString("base64url")}`;
  const issue = (grant: Grant) => {
    const access = secret("at");
    const refresh = secret("rt");
    accessTokens.set(access, { ...grant, expiresAt: Date.now() + ttl * 1000 });
    refreshTokens.set(refresh, grant);
    issued.push(access, refresh);
    return {
      access_token: access,
      token_type: "Bearer",
      expires_in: ttl,
      refresh_token: refresh,
      scope: grant.scopes.join(" "),
    };
  };

  const provider = {
    clientsStore: {
      getClient: (id: string) => clients.get(id),
      registerClient: (client: Omit<OAuthClientInformationFull, "client_id_issued_at">) => {
        counts.registrations++;
        const full = client as OAuthClientInformationFull;
        clients.set(full.client_id, full);
        return full;
      },
    },
    authorize(client: OAuthClientInformationFull, params: AuthorizeParams, res: Res) {
      counts.authorizations++;
      if (params.state) states.push(params.state);
      const id = randomUUID();
      pending.set(id, { client, params });
      res.status(200).type("html").send(
        `<!doctype html><title>Authorize ${escape(client.client_name ?? client.client_id)}</title>` +
          `<p>${escape(client.client_name ?? "A client")} asks for: ${escape(params.scopes?.join(" ") ?? "")}</p>` +
          `<a id="approve" href="/approve?request=${id}">Approve</a> <a id="deny" href="/deny?request=${id}">Deny</a>`,
      );
      return Promise.resolve();
    },
    challengeForAuthorizationCode(_client: OAuthClientInformationFull, code: string) {
      const entry = codes.get(code);
      if (!entry) throw new InvalidGrantError("Unknown authorization code");
      return Promise.resolve(entry.params.codeChallenge);
    },
    exchangeAuthorizationCode(
      client: OAuthClientInformationFull,
      code: string,
      _verifier?: string,
      redirectUri?: string,
      resource?: URL,
    ) {
      const entry = codes.get(code);
      codes.delete(code);
      if (!entry || entry.client.client_id !== client.client_id) {
        throw new InvalidGrantError("Unknown authorization code");
      }
      if (redirectUri && redirectUri !== entry.params.redirectUri) {
        throw new InvalidGrantError("redirect_uri differs from the authorization request");
      }
      const asked = entry.params.resource?.href;
      if (resource && asked && resource.href !== asked) {
        throw new InvalidGrantError("resource differs from the authorization request");
      }
      counts.codeExchanges++;
      return Promise.resolve(
        issue({ clientId: client.client_id, scopes: entry.params.scopes ?? [], resource: asked ?? resource?.href }),
      );
    },
    exchangeRefreshToken(client: OAuthClientInformationFull, refreshToken: string) {
      const grant = refreshTokens.get(refreshToken);
      if (!grant || grant.clientId !== client.client_id) {
        counts.refreshFailures++;
        throw new InvalidGrantError("The refresh token is invalid or was revoked");
      }
      // Rotation: a refresh token works once.
      refreshTokens.delete(refreshToken);
      counts.refreshes++;
      return Promise.resolve(issue(grant));
    },
    verifyAccessToken(token: string) {
      const found = accessTokens.get(token);
      if (!found) throw new InvalidTokenError("Unknown token");
      return Promise.resolve({
        token,
        clientId: found.clientId,
        scopes: found.scopes,
        expiresAt: Math.floor(found.expiresAt / 1000),
        ...(found.resource ? { resource: new URL(found.resource) } : {}),
      });
    },
    revokeToken(_client: OAuthClientInformationFull, request: { token: string }) {
      counts.revocations++;
      accessTokens.delete(request.token);
      refreshTokens.delete(request.token);
      return Promise.resolve();
    },
  };

  // The authorization server.
  const as = express();
  const asServer = await listen((port) => as.listen(port, "127.0.0.1"));
  const issuer = `http://127.0.0.1:${port(asServer)}/`;
  const noLimit = { rateLimit: false as const };
  as.use(mcpAuthRouter({
    provider,
    issuerUrl: new URL(issuer),
    scopesSupported: scopes,
    authorizationOptions: noLimit,
    tokenOptions: noLimit,
    clientRegistrationOptions: noLimit,
    revocationOptions: noLimit,
  }));
  const answer = (approve: boolean) => (req: { query: Record<string, unknown> }, res: Res) => {
    const id = String(req.query.request ?? "");
    const entry = pending.get(id);
    pending.delete(id);
    if (!entry) return void res.status(400).send("Unknown or used authorization request");
    const target = new URL(entry.params.redirectUri);
    if (approve) {
      const code = secret("code");
      codes.set(code, entry);
      target.searchParams.set("code", code);
    } else {
      target.searchParams.set("error", "access_denied");
    }
    if (entry.params.state !== undefined) target.searchParams.set("state", entry.params.state);
    res.redirect(302, target.href);
  };
  as.get("/approve", answer(true));
  as.get("/deny", answer(false));
  const oauthMetadata = createOAuthMetadata({ provider, issuerUrl: new URL(issuer) });

  // The resource server.
  const rs = await listen((port) =>
    createServer((req, res) => void serveFetch(req, res, route)).listen(port, "127.0.0.1")
  );
  const base = `http://127.0.0.1:${port(rs)}`;
  const mcpUrl = `${base}/mcp`;
  const otherUrl = `${base}/other/mcp`;
  const evilUrl = `${base}/evil/mcp`;
  const verifier = {
    verifyAccessToken(token: string): Promise<AuthInfo> {
      const found = accessTokens.get(token);
      if (!found || found.expiresAt <= Date.now() || (rejectingAll && !found.minted)) {
        return Promise.reject(new OAuthError(OAuthErrorCode.InvalidToken, "The access token is invalid or expired"));
      }
      return Promise.resolve({
        token,
        clientId: found.clientId,
        scopes: found.scopes,
        expiresAt: Math.floor(found.expiresAt / 1000),
        ...(found.resource ? { resource: new URL(found.resource) } : {}),
      });
    },
  };
  const gate = (resource: string) =>
    requireBearerAuth({
      verifier,
      expectedResource: new URL(resource),
      resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(new URL(resource)),
    });
  const gates = { [mcpUrl]: gate(mcpUrl), [otherUrl]: gate(otherUrl), [evilUrl]: gate(mcpUrl) };
  const handler = createMcpHandler((ctx) => mcpServer(ctx.authInfo, ctx.requestInfo));

  async function route(request: Request): Promise<Response> {
    const url = new URL(request.url);
    for (const resource of [mcpUrl, otherUrl]) {
      const metadata = oauthMetadataResponse(request, {
        oauthMetadata,
        resourceServerUrl: new URL(resource),
        scopesSupported: scopes,
        resourceName: "codemode OAuth test server",
      });
      if (metadata) return metadata;
    }
    if (url.pathname === "/.well-known/oauth-protected-resource/evil/mcp") {
      return Response.json({ resource: mcpUrl, authorization_servers: [issuer], scopes_supported: scopes });
    }
    const resource = `${base}${url.pathname}`;
    const check = gates[resource];
    if (!check) return new Response("Not found", { status: 404 });
    counts.mcpRequests++;
    const header = request.headers.get("authorization");
    requests.push({ method: request.method, path: url.pathname, token: header?.replace(/^Bearer\s+/i, "") ?? null });
    const auth = await check(request);
    if (auth instanceof Response) {
      counts.unauthorized++;
      return auth;
    }
    return await handler.fetch(request, { authInfo: auth });
  }

  return {
    issuer,
    mcpUrl,
    otherUrl,
    evilUrl,
    counts,
    issued: () => [...issued],
    states: () => [...states],
    requests: () => [...requests],
    expireAccessTokens() {
      for (const token of accessTokens.values()) if (!token.minted) token.expiresAt = Date.now() - 1;
    },
    revokeAccessTokens() {
      for (const [value, token] of accessTokens) if (!token.minted) accessTokens.delete(value);
    },
    revokeRefreshTokens: () => refreshTokens.clear(),
    rejectAllTokens(on = true) {
      rejectingAll = on;
    },
    setAccessTokenTtl(seconds) {
      ttl = seconds;
    },
    mint(resource) {
      const token = secret("at");
      accessTokens.set(token, { clientId: "minted", scopes, resource, expiresAt: Date.now() + 3600_000, minted: true });
      issued.push(token);
      return token;
    },
    async close() {
      await Promise.all([rs, asServer].map((server) =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        })
      ));
    },
  };
}

/** The part of express's response the authorization pages use (express ships no types here). */
interface Res {
  status(code: number): Res;
  type(type: string): Res;
  send(body: string): void;
  redirect(status: number, url: string): void;
}

interface AuthorizeParams {
  state?: string;
  scopes?: string[];
  codeChallenge: string;
  redirectUri: string;
  resource?: URL;
}

/** The MCP server behind the bearer gate; one per request (stateless). */
function mcpServer(auth: AuthInfo | undefined, request: Request | undefined): McpServer {
  const server = new McpServer({ name: "oauth-test", version: "1.0.0" });
  const text = (value: string, isError = false) => ({ content: [{ type: "text" as const, text: value }], isError });
  server.registerTool(
    "echo",
    { description: "Echoes a message", inputSchema: z.object({ message: z.string() }) },
    ({ message }) => text(message),
  );
  server.registerTool(
    "whoami",
    { description: "The client and scopes the request was authorized for" },
    () => text(JSON.stringify({ client: auth?.clientId, scopes: auth?.scopes, resource: auth?.resource?.href })),
  );
  server.registerTool(
    "fail",
    { description: "Always fails", inputSchema: z.object({ message: z.string() }) },
    ({ message }) => text(`failed: ${message}`, true),
  );
  server.registerTool(
    "auth_error",
    { description: "Fails quoting the credentials it got, as careless debugging code does" },
    () => text(`rejected credentials: ${request?.headers.get("authorization") ?? "none"}`, true),
  );
  return server;
}

/** Serves one node:http request with a fetch-style handler (the v2 server SDK's shape). */
async function serveFetch(
  req: IncomingMessage,
  res: ServerResponse,
  handle: (request: Request) => Promise<Response>,
): Promise<void> {
  try {
    const chunks: Uint8Array[] = [];
    for await (const chunk of req) chunks.push(chunk as Uint8Array);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const one of [value ?? []].flat()) headers.append(name, one);
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD" && chunks.length > 0;
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      ...(hasBody ? { body: new Blob(chunks as BlobPart[]) } : {}),
    });
    const response = await handle(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) for await (const chunk of response.body) res.write(chunk);
    res.end();
  } catch (error) {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(error));
  }
}

function listen(start: (port: number) => HttpServer): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    const server = start(0);
    server.once("listening", () => resolve(server));
    server.once("error", reject);
  });
}

function port(server: HttpServer): number {
  return (server.address() as { port: number }).port;
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

if (import.meta.main) {
  const ttl = Number(Deno.args.find((a) => a.startsWith("--ttl="))?.slice(6) ?? 3600);
  const server = await startOAuthServer({ accessTokenTtl: ttl });
  console.log(JSON.stringify({ issuer: server.issuer, mcp: server.mcpUrl, other: server.otherUrl }));
}
