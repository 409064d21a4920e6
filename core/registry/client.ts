/**
 * The MCP registry client: `GET <base>/v0.1/servers?search=...&version=latest` and one server's entry
 * (`/v0.1/servers/<name>/versions/<version>`), falling back to the `/v0/` paths for registries that
 * predate v0.1. Answers are size-capped and time-limited, validated entry by entry (server_json.ts), and
 * cached for a short time. Every failure is a RegistryError naming the registry's host and what to do.
 * @module
 */
import { type LeftOut, parseEntry, type RegistryEntry } from "./server_json.ts";

/** The official MCP registry. */
export const OFFICIAL_REGISTRY = "https://registry.modelcontextprotocol.io";

/** A registry that cannot answer: unreachable, slow, an HTTP error, or something that is not an answer. */
export class RegistryError extends Error {
  /** `kind` says which: "timeout", "unreachable", "http", "malformed", "not_found". */
  constructor(
    readonly kind: "timeout" | "unreachable" | "http" | "malformed" | "not_found",
    message: string,
  ) {
    super(message);
    this.name = "RegistryError";
  }
}

/** Options of {@link RegistryClient}. */
export interface RegistryClientOptions {
  /** Milliseconds one request may take, answer included. */
  timeoutMs?: number;
  /** How long an answer is reused. */
  cacheMs?: number;
  /** Largest answer read, in bytes. */
  maxBytes?: number;
  /** The fetch to use (tests). */
  fetch?: typeof fetch;
}

/** Defaults of {@link RegistryClientOptions}. */
export const defaults = { timeoutMs: 10_000, cacheMs: 60_000, maxBytes: 16 * 1024 * 1024 };

/** Entries of one search, and the ones left out. */
export interface SearchAnswer {
  entries: RegistryEntry[];
  leftOut: LeftOut[];
}

/** Answers kept at most (oldest dropped first). */
const CACHE_ENTRIES = 200;
/** Entries asked for per page; the registry's own cap is 100. */
const PAGE = 100;

/** A client of one registry. */
export class RegistryClient {
  readonly baseUrl: string;
  readonly host: string;
  #options: typeof defaults & { fetch: typeof fetch };
  #cache = new Map<string, { at: number; value: Promise<unknown> }>();
  /** The API version that answered; "v0.1" is tried first. */
  #api?: "v0.1" | "v0";

  /** A client of the registry at `baseUrl` (e.g. https://registry.modelcontextprotocol.io). */
  constructor(baseUrl: string, options: RegistryClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.host = new URL(this.baseUrl).host;
    this.#options = {
      timeoutMs: options.timeoutMs ?? defaults.timeoutMs,
      cacheMs: options.cacheMs ?? defaults.cacheMs,
      maxBytes: options.maxBytes ?? defaults.maxBytes,
      fetch: options.fetch ?? fetch,
    };
  }

  /** The latest version of each server whose name contains `query`, up to `limit`, valid entries only. */
  async search(query: string, limit: number): Promise<SearchAnswer> {
    const entries: RegistryEntry[] = [];
    const leftOut: LeftOut[] = [];
    let cursor: string | undefined;
    // Left-out entries take room on a page; a second page makes up for a few, never an endless walk.
    for (let page = 0; page < 2 && entries.length < limit; page++) {
      const params = new URLSearchParams({ search: query, version: "latest", limit: String(PAGE) });
      if (cursor) params.set("cursor", cursor);
      const answer = await this.#get(`servers?${params}`);
      if (!isRecord(answer) || !Array.isArray(answer.servers)) {
        throw this.#malformed("a server list without a `servers` array");
      }
      const items: unknown[] = answer.servers;
      for (const item of items) {
        const parsed = parseEntry(item);
        if ("entry" in parsed) entries.push(parsed.entry);
        else leftOut.push(parsed.leftOut);
      }
      const next = isRecord(answer.metadata) ? answer.metadata.nextCursor : undefined;
      cursor = typeof next === "string" && next && next.length <= 1024 ? next : undefined;
      if (!cursor) break;
    }
    return { entries: entries.slice(0, limit), leftOut };
  }

  /** One server's entry: `version` exactly, or its latest. Throws RegistryError ("not_found", ...). */
  async get(name: string, version?: string): Promise<RegistryEntry> {
    const path = `servers/${encodeURIComponent(name)}/versions/${encodeURIComponent(version ?? "latest")}`;
    let answer: unknown;
    try {
      answer = await this.#get(path);
    } catch (error) {
      if (!(error instanceof RegistryError && error.kind === "not_found")) throw error;
      throw new RegistryError(
        "not_found",
        `The MCP registry at ${this.host} has no server "${name}"${
          version ? ` at version ${version}` : ""
        }; ` +
          "find_servers() lists what it has",
      );
    }
    const parsed = parseEntry(answer);
    if ("leftOut" in parsed) {
      throw new RegistryError(
        "malformed",
        `The MCP registry at ${this.host} sent an entry for "${name}" that codemode will not use: ${parsed.leftOut.why}`,
      );
    }
    if (parsed.entry.server.name !== name) {
      throw this.#malformed(`an entry named "${parsed.entry.server.name}" when "${name}" was asked for`);
    }
    return parsed.entry;
  }

  /** Drops every cached answer. */
  clear(): void {
    this.#cache.clear();
  }

  /** The JSON answer at `<base>/<api>/<path>`, cached; tries v0.1, then v0 once v0.1 is not there. */
  async #get(path: string): Promise<unknown> {
    const cached = this.#cache.get(path);
    if (cached && performance.now() - cached.at < this.#options.cacheMs) return await cached.value;
    const value = this.#fetchApi(path);
    this.#cache.set(path, { at: performance.now(), value });
    value.catch(() => this.#cache.delete(path));
    if (this.#cache.size > CACHE_ENTRIES) this.#cache.delete(this.#cache.keys().next().value!);
    return await value;
  }

  async #fetchApi(path: string): Promise<unknown> {
    if (this.#api) return await this.#fetchJson(`${this.baseUrl}/${this.#api}/${path}`);
    try {
      const value = await this.#fetchJson(`${this.baseUrl}/v0.1/${path}`);
      this.#api = "v0.1";
      return value;
    } catch (error) {
      // Only a 404 may mean a registry without v0.1 (or a missing entry: v0 then says so too).
      if (!(error instanceof RegistryError && error.kind === "not_found")) throw error;
    }
    const value = await this.#fetchJson(`${this.baseUrl}/v0/${path}`);
    this.#api = "v0";
    return value;
  }

  async #fetchJson(url: string): Promise<unknown> {
    const signal = AbortSignal.timeout(this.#options.timeoutMs);
    const seconds = `${Math.round(this.#options.timeoutMs / 100) / 10} s`;
    let response: Response;
    try {
      response = await this.#options.fetch(url, {
        signal,
        headers: { accept: "application/json" },
        redirect: "follow",
      });
    } catch (error) {
      if (signal.aborted) {
        throw new RegistryError(
          "timeout",
          `The MCP registry at ${this.host} did not answer within ${seconds}`,
        );
      }
      throw new RegistryError(
        "unreachable",
        `The MCP registry at ${this.host} could not be reached (${causeOf(error)}); check ` +
          "CODEMODE_REGISTRY_URL and the network",
      );
    }
    if (response.status === 404) {
      await response.body?.cancel().catch(() => {});
      throw new RegistryError("not_found", `The MCP registry at ${this.host} has no such entry`);
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      throw new RegistryError(
        "http",
        `The MCP registry at ${this.host} answered ${response.status} ${response.statusText}`.trim(),
      );
    }
    let text: string;
    try {
      text = await readCapped(response, this.#options.maxBytes);
    } catch (error) {
      if (signal.aborted) {
        throw new RegistryError(
          "timeout",
          `The MCP registry at ${this.host} did not answer within ${seconds}`,
        );
      }
      if (error instanceof RegistryError) throw this.#malformed(error.message);
      throw new RegistryError(
        "unreachable",
        `The MCP registry at ${this.host} broke off (${causeOf(error)})`,
      );
    }
    try {
      return JSON.parse(text);
    } catch {
      throw this.#malformed("an answer that is not JSON");
    }
  }

  #malformed(what: string): RegistryError {
    return new RegistryError("malformed", `The MCP registry at ${this.host} sent ${what}`);
  }
}

/** The body as text, refusing one over `max` bytes without reading the rest. */
async function readCapped(response: Response, max: number): Promise<string> {
  const declared = Number(response.headers.get("content-length"));
  if (declared > max) {
    await response.body?.cancel().catch(() => {});
    throw new RegistryError("malformed", `an answer of ${declared} bytes, over the ${max}-byte cap`);
  }
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw new RegistryError("malformed", `an answer over the ${max}-byte cap`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.byteLength;
  }
  return new TextDecoder().decode(all);
}

function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return String(cause?.code ?? cause?.message ?? (error as Error)?.message ?? error).slice(0, 200);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
