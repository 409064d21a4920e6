/**
 * The dashboard's HTTP face, shared by `codemode ui` and `serve --http`: the page and its assets at `/`,
 * its data (`/api/state`, live updates over server-sent events at `/api/events`, `/api/search`,
 * `/api/skills`), the files of a serve's runs (their images and artifacts, files.ts), answers to
 * approvals, `/healthz` and `/metrics`. Every request passes the Host and Origin checks of `serve --http`
 * (no DNS rebinding, no cross-site requests); everything but `/healthz` needs the login cookie or the
 * token (see auth.ts), and answers 401 without. While a page is open, the watch marker says so, so a
 * serve whose client cannot be asked for an approval lets the question wait for the page.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { guardRequest } from "../serve/http_guard.ts";
import { readBody } from "../serve/node_http_bridge.ts";
import type { SearchHit } from "../catalog/index.ts";
import { log } from "../observe/log.ts";
import { METRICS_CONTENT_TYPE } from "../observe/metrics.ts";
import type { WatchMarker } from "../observe/watchers.ts";
import type { DashboardAuth } from "./auth.ts";
import { type Asset, dashboardAssets } from "./assets.ts";
import type { LiveServes, LiveUpdate, ServeView } from "./live_serves.ts";
import { sendArtifact, sendDisplay } from "./files.ts";
import { json, SECURITY_HEADERS } from "./responses.ts";
import type { SkillsView } from "./skills.ts";

/** The body of `GET /healthz`: liveness and a few counts, nothing private. */
export interface HealthBody {
  status: "ok";
  /** The fleet node id of a serve --http (CODEMODE_NODE_ID). */
  node?: string;
  version: string;
  uptimeSeconds: number;
  /** The sandbox runtime in use (podman, docker, ...), or null before one was selected. */
  runtime: string | null;
  /** Live sandbox sessions. */
  sessions: number;
  /** Upstream MCP servers connected and ready. */
  serversUp: number;
}

/** What a dashboard serves. */
export interface DashboardOptions {
  /** "ui": every serve on the machine; "serve": the serve --http process itself. */
  mode: "ui" | "serve";
  version: string;
  auth: DashboardAuth;
  /** Hostnames the Host and Origin headers may name (undefined: any Host, as on a wildcard bind). */
  allowedHosts?: readonly string[];
  serves: LiveServes;
  health(): HealthBody | Promise<HealthBody>;
  /** The Prometheus text of `/metrics`. */
  metrics(): Promise<string>;
  search(query: string, limit: number): SearchHit[] | Promise<SearchHit[]>;
  /** The skills panel's data (`codemode skills list`'s view); without it the panel says skills are off. */
  skills?(): Promise<SkillsView>;
  /** Says whether pages are open (see core/observe/watchers.ts). */
  watch?: WatchMarker;
  /** A sentence the page shows above everything (why it may look empty, say). */
  notice?: string;
}

/** The routes under `/api/serves/<pid>/`: what each names and which method it takes. */
const SERVE_ROUTE = /^\/api\/serves\/([1-9][0-9]{0,9})\/(approvals|displays|artifacts)\/(.+)$/;
const APPROVAL_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Events a page gets at once on connecting, per serve; older ones are in `/api/state`. */
const SNAPSHOT_EVENTS = 1000;
/** A page that reads this far behind is dropped; it reconnects and starts from a snapshot. */
const MAX_BACKLOG_BYTES = 8 * 1024 * 1024;
const HEARTBEAT_MS = 15_000;
const ANSWERS = new Set(["approve", "decline"]);
/** The scopes of a tool call's question; other questions name their own. */
const CALL_SCOPES = ["once", "session"];

/** Serves the dashboard's requests. */
export class Dashboard {
  #options: DashboardOptions;
  #streams = new Set<ServerResponse>();

  /** A dashboard over `options.serves`; nothing is read until a page asks. */
  constructor(options: DashboardOptions) {
    this.#options = options;
  }

  /** Ends every open live-update stream (the server is closing); resolves once the watch marker is gone. */
  async close(): Promise<void> {
    for (const res of this.#streams) res.end();
    this.#streams.clear();
    this.#options.serves.close();
    await this.#options.watch?.close();
  }

  /** Answers one request (any path: unknown ones get 404). */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const refusal = guardRequest(
      { host: req.headers.host, origin: req.headers.origin },
      { allowedHosts: this.#options.allowedHosts },
    );
    if (refusal) {
      log.warn("refused dashboard request", { status: refusal.status, reason: refusal.message });
      return json(res, refusal.status, { error: refusal.message });
    }
    const path = url.pathname;
    const method = req.method ?? "GET";
    const serveRoute = SERVE_ROUTE.exec(path);
    const post = serveRoute?.[2] === "approvals";
    const known = path === "/" || path === "/healthz" || path === "/metrics" || path.startsWith("/assets/") ||
      path.startsWith("/api/");
    if (!known) return this.#notFound(res, path);
    if (post) {
      if (method !== "POST") return notAllowed(res, "POST");
    } else if (method !== "GET" && method !== "HEAD") {
      return notAllowed(res, "GET");
    }
    if (path === "/healthz") return json(res, 200, await this.#options.health());
    if (path === "/" && (url.searchParams.has("login") || url.searchParams.has("token"))) {
      return this.#login(res, url);
    }
    if (
      !this.#options.auth.allows({ cookie: req.headers.cookie, authorization: req.headers.authorization })
    ) {
      return unauthorized(res, path, this.#options.mode);
    }
    if (path === "/") return sendAsset(req, res, dashboardAssets().index, dashboardAssets().csp);
    if (path === "/metrics") return this.#metrics(res);
    if (path.startsWith("/assets/")) {
      const asset = dashboardAssets().files.get(path.slice("/assets/".length));
      return asset ? sendAsset(req, res, asset) : this.#notFound(res, path);
    }
    if (path === "/api/state") return json(res, 200, await this.#snapshot());
    if (path === "/api/events") return this.#stream(req, res);
    if (path === "/api/search") return this.#search(res, url);
    if (path === "/api/skills") return this.#skills(res);
    if (serveRoute) return this.#serveRoute(req, res, Number(serveRoute[1]), serveRoute[2], serveRoute[3]);
    return this.#notFound(res, path);
  }

  /** A route under `/api/serves/<pid>/`: only for a serve shown here (alive, publishing, ours). */
  async #serveRoute(
    req: IncomingMessage,
    res: ServerResponse,
    pid: number,
    kind: string,
    rest: string,
  ): Promise<void> {
    const view = await this.#view(pid);
    if (!view) return json(res, 404, { error: `No serve with pid ${pid} is shown here` });
    const stateDir = this.#options.serves.stateDir;
    if (kind === "displays") return sendDisplay(req, res, stateDir, view, rest);
    if (kind === "artifacts") return sendArtifact(req, res, stateDir, view, rest);
    return this.#answer(req, res, view, rest);
  }

  /** Serve `pid` as last read, read again first (its state may have changed since the last poll). */
  async #view(pid: number): Promise<ServeView | undefined> {
    await this.#options.serves.refresh();
    return this.#options.serves.serves().find((s) => s.pid === pid);
  }

  #notFound(res: ServerResponse, path: string): void {
    const where = this.#options.mode === "serve" ? "; MCP is served at /mcp, the dashboard at /" : "";
    json(res, 404, { error: `Not found: "${path}"${where}` });
  }

  #login(res: ServerResponse, url: URL): void {
    const auth = this.#options.auth;
    const code = url.searchParams.get("login");
    const token = url.searchParams.get("token");
    const session = code !== null ? auth.login(code) : auth.loginWithToken(token ?? "");
    if (!session) {
      const why = code !== null
        ? "This login link is not valid: each one works once, and codemode ui prints a new one when it starts."
        : "Wrong token.";
      return page(res, 401, "Not signed in", why);
    }
    // The redirect drops the code (or token) from the address bar and from history.
    res.writeHead(303, {
      ...SECURITY_HEADERS,
      location: "/",
      "set-cookie": auth.cookie(session),
      "cache-control": "no-store",
    });
    res.end();
  }

  async #metrics(res: ServerResponse): Promise<void> {
    const body = await this.#options.metrics();
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": METRICS_CONTENT_TYPE,
      "cache-control": "no-store",
    });
    res.end(body);
  }

  async #snapshot(events = Infinity): Promise<Record<string, unknown>> {
    await this.#options.serves.refresh();
    return {
      version: this.#options.version,
      mode: this.#options.mode,
      ...(this.#options.notice ? { notice: this.#options.notice } : {}),
      serves: this.#options.serves.serves().map((s) => ({
        pid: s.pid,
        state: s.state,
        events: Number.isFinite(events) ? s.events.slice(-events) : s.events,
      })),
    };
  }

  async #stream(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
    const send = (event: string, data: unknown) => {
      if (res.writableEnded) return;
      if (res.writableLength > MAX_BACKLOG_BYTES) {
        log.info("dropping a dashboard page that fell behind; it reconnects", {});
        return void res.destroy();
      }
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    this.#streams.add(res);
    void this.#options.watch?.pages(this.#streams.size);
    let off = () => {};
    let closed = false;
    const heartbeat = setInterval(() => !res.writableEnded && res.write(": ping\n\n"), HEARTBEAT_MS);
    (heartbeat as { unref?: () => void }).unref?.();
    const done = () => {
      if (closed) return;
      closed = true;
      off();
      clearInterval(heartbeat);
      this.#streams.delete(res);
      void this.#options.watch?.pages(this.#streams.size);
    };
    // Listen for the page going away first: it may leave while the snapshot is read.
    req.once("close", done);
    res.once("close", done);
    const snapshot = await this.#snapshot(SNAPSHOT_EVENTS);
    if (closed) return;
    send("snapshot", snapshot);
    off = this.#options.serves.subscribe(({ type, ...data }: LiveUpdate) => send(type, data));
  }

  async #search(res: ServerResponse, url: URL): Promise<void> {
    const query = (url.searchParams.get("q") ?? "").trim();
    const limit = Number(url.searchParams.get("limit") ?? 10);
    if (!query) {
      return json(res, 400, { error: "Empty query: give words to search for, e.g. ?q=read%20file" });
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      return json(res, 400, { error: `Invalid limit "${url.searchParams.get("limit")}": give 1 to 100` });
    }
    try {
      json(res, 200, { query, hits: await this.#options.search(query, limit) });
    } catch (error) {
      json(res, 500, { error: `Search failed: ${(error as Error).message}` });
    }
  }

  async #skills(res: ServerResponse): Promise<void> {
    if (!this.#options.skills) {
      return json(res, 200, { mode: "off", directories: [], skills: [], diagnostics: [] });
    }
    try {
      json(res, 200, await this.#options.skills());
    } catch (error) {
      json(res, 500, { error: `Could not read the skills: ${(error as Error).message}` });
    }
  }

  /**
   * Passes an answer to a pending approval to the serve that asked, through its inbox; only for a question
   * that serve says is open, so a late or made-up answer is refused here with a reason.
   */
  async #answer(req: IncomingMessage, res: ServerResponse, view: ServeView, id: string): Promise<void> {
    // A JSON body cannot come from a plain cross-site form: browsers must ask first, and Origin is checked.
    if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
      return json(res, 415, { error: "Send the answer as JSON: Content-Type: application/json" });
    }
    const body = await readBody(req, 4096);
    let parsed: { answer?: unknown; scope?: unknown } | undefined;
    try {
      parsed = body === "too large" ? undefined : JSON.parse(new TextDecoder().decode(body));
    } catch { /* answered below */ }
    const answer = parsed?.answer;
    const scope = parsed?.scope;
    const open = APPROVAL_ID.test(id) ? view.state.approvals?.find((a) => a.id === id) : undefined;
    const scopes = open?.scopes?.map((s) => s.value) ?? CALL_SCOPES;
    if (
      typeof answer !== "string" || !ANSWERS.has(answer) ||
      (scope !== undefined && !scopes.includes(String(scope)))
    ) {
      return json(res, 400, {
        error: 'Invalid answer: send {"answer": "approve"} or {"answer": "decline"} ' +
          `(optionally with "scope": ${scopes.map((s) => `"${s}"`).join(" or ")})`,
      });
    }
    if (!open) {
      return json(res, 404, {
        error: `No open question "${id.slice(0, 128)}" on serve ${view.pid}: it was answered, timed out or ` +
          "withdrawn (its run ended), or never asked",
      });
    }
    if (answer === "approve" && open.fields?.some((f) => f.required)) {
      return json(res, 409, {
        error: "This question needs values only the MCP client's form can take (a secret, say): answer it " +
          "there, or decline it here",
      });
    }
    try {
      const message = { kind: "approval", id, answer, ...(scope ? { scope } : {}), from: "dashboard" };
      const sent = await this.#options.serves.send(view.pid, message);
      if (!sent) return json(res, 404, { error: `No serve with pid ${view.pid} is shown here` });
    } catch (error) {
      return json(res, 409, { error: `Could not pass the answer on: ${(error as Error).message}` });
    }
    json(res, 202, { ok: true });
  }
}

function sendAsset(req: IncomingMessage, res: ServerResponse, asset: Asset, csp?: string): void {
  const headers: Record<string, string> = {
    ...SECURITY_HEADERS,
    "content-type": asset.type,
    etag: asset.etag,
    "cache-control": "no-cache",
    ...(csp ? { "content-security-policy": csp } : {}),
  };
  if (req.headers["if-none-match"] === asset.etag) {
    res.writeHead(304, headers);
    return void res.end();
  }
  res.writeHead(200, { ...headers, "content-length": String(asset.body.length) });
  res.end(req.method === "HEAD" ? undefined : asset.body);
}

function notAllowed(res: ServerResponse, allow: string): void {
  res.writeHead(405, { ...SECURITY_HEADERS, allow, "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify({ error: `Method not allowed: use ${allow}` }));
}

function unauthorized(res: ServerResponse, path: string, mode: "ui" | "serve"): void {
  const how = mode === "ui"
    ? "Open the login URL that codemode ui printed on its standard error (it works once)."
    : "Send Authorization: Bearer <token>, or open /?token=<token> once to sign this browser in.";
  if (path === "/") return page(res, 401, "Not signed in", how);
  res.writeHead(401, {
    ...SECURITY_HEADERS,
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    ...(mode === "serve" ? { "www-authenticate": 'Bearer realm="codemode"' } : {}),
  });
  res.end(JSON.stringify({ error: `Not signed in: ${how}` }));
}

/** A small page with no script, for the few answers a person reads in the browser. */
function page(res: ServerResponse, status: number, title: string, text: string): void {
  const escape = (s: string) =>
    s.replace(
      /[&<>"']/g,
      (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
    );
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; img-src data:",
  });
  res.end(
    `<!doctype html><html lang="en"><meta charset="utf-8"><link rel="icon" href="data:,">` +
      `<title>codemode: ${escape(title)}</title>` +
      `<h1>${escape(title)}</h1><p>${escape(text)}</p></html>`,
  );
}
