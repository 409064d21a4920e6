/**
 * The pool of MCP client connections to the upstream servers the sandbox calls: one lazily started,
 * self-healing connection per configured server, safe to use from hundreds of concurrent calls.
 * @module
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../contracts/discovery.ts";
import type { ServerAuth } from "../auth/server_auth.ts";
import { type CallOptions, type ServerStatus, UpstreamConnection } from "./connection.ts";
import { UnknownServerError, UpstreamClosedError } from "./errors.ts";
import { DEFAULT_MAX_MESSAGE_BYTES } from "./stdio_transport.ts";
import type { ToolCaps, ToolProblem } from "./tool_caps.ts";
import { withoutUndefined } from "../without_undefined.ts";

export type { CallOptions, ServerState, ServerStatus } from "./connection.ts";
export type { ToolProblem } from "./tool_caps.ts";
export * from "./errors.ts";

/** Pool-wide limits; a server's own `timeoutMs` overrides `callTimeoutMs`. */
export interface UpstreamPoolOptions {
  /** Per-call timeout, in milliseconds. */
  callTimeoutMs?: number;
  /** Time allowed for starting a server and finishing the MCP handshake, in milliseconds. */
  startTimeoutMs?: number;
  /** Largest single message accepted from a stdio server, in bytes. */
  maxMessageBytes?: number;
  /** The OAuth state of a remote server codemode logs in to (see `OAuthClients.forServer`). */
  auth?: (spec: ServerSpec) => ServerAuth | undefined;
  /** The caps on each server's tools (default TOOL_CAPS, tool_caps.ts). */
  toolCaps?: ToolCaps;
  /** Called when a server says its tool list changed (the catalog re-lists it). */
  onToolsChanged?: (server: string) => void;
}

/** The limits used when the caller gives none. */
export const defaults = {
  callTimeoutMs: 60_000,
  startTimeoutMs: 30_000,
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
} satisfies Required<Omit<UpstreamPoolOptions, "auth" | "toolCaps" | "onToolsChanged">>;

/** Client connections to every configured upstream MCP server, started on first use and kept warm. */
export class UpstreamPool {
  #connections = new Map<string, UpstreamConnection>();
  #closed = false;
  #limits: typeof defaults;
  #auth: UpstreamPoolOptions["auth"];

  constructor(specs: ServerSpec[], options: UpstreamPoolOptions = {}) {
    const { auth, ...rest } = options;
    this.#limits = { ...defaults, ...withoutUndefined(rest) };
    this.#auth = auth;
    for (const spec of specs) this.add(spec);
  }

  /** Adds a server (a configured one, or one added from a registry while serving); not started yet. */
  add(spec: ServerSpec): void {
    if (this.#closed) {
      throw new UpstreamClosedError(`The upstream pool is closed; "${spec.name}" was not added`, spec.name);
    }
    if (this.#connections.has(spec.name)) {
      throw new TypeError(`Duplicate MCP server name "${spec.name}": discovery must resolve it to one spec`);
    }
    this.#connections.set(spec.name, new UpstreamConnection(spec, this.#limits, this.#auth?.(spec)));
  }

  /** Stops a server (stdio: its whole process tree) and forgets it; false when there was none. */
  async remove(name: string): Promise<boolean> {
    const connection = this.#connections.get(name);
    if (!connection) return false;
    this.#connections.delete(name);
    await connection.close();
    return true;
  }

  /** The configured server names, in configuration order. */
  names(): string[] {
    return [...this.#connections.keys()];
  }

  /** Whether a server of this name is configured. */
  has(name: string): boolean {
    return this.#connections.has(name);
  }

  /** The configuration of one server. */
  spec(name: string): ServerSpec {
    return this.#get(name).spec;
  }

  /** Where one server is in its lifecycle; never starts it. */
  status(name: string): ServerStatus {
    return this.#get(name).status();
  }

  /** The server's tools (all pages), starting it if needed; cached until it restarts or reports a change. */
  async listTools(name: string): Promise<Tool[]> {
    return await this.#use(name).listTools();
  }

  /** The server's tools that pass the caps, and the problems of those left out (or kept with a caveat). */
  async listing(name: string): Promise<{ tools: Tool[]; problems: ToolProblem[] }> {
    return await this.#use(name).listing();
  }

  /** The skills the server publishes through the skills extension (starting it if needed). */
  async listSkills(name: string): Promise<{ name: string; description: string }[]> {
    return await this.#use(name).listSkills();
  }

  /** One verified file of a skill the server publishes (`SKILL.md` by default), and its file list. */
  async readSkill(
    name: string,
    skill: string,
    file?: string,
  ): Promise<{ uri: string; text?: string; bytes: Uint8Array; files: string[] }> {
    return await this.#use(name).readSkill(skill, file);
  }

  /** Calls one tool and returns the raw MCP result; `isError` results are returned, not thrown. */
  async callTool(
    name: string,
    tool: string,
    args: Record<string, unknown> = {},
    options?: CallOptions,
  ): Promise<CallToolResult> {
    return await this.#use(name).callTool(tool, args, options);
  }

  /** Stops every server (stdio: the whole process tree) and refuses further calls. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#connections.values()].map((connection) => connection.close()));
  }

  #get(name: string): UpstreamConnection {
    const connection = this.#connections.get(name);
    if (!connection) throw new UnknownServerError(name, this.names());
    return connection;
  }

  #use(name: string): UpstreamConnection {
    if (this.#closed) {
      throw new UpstreamClosedError(`The upstream pool is closed; no more calls to "${name}"`, name);
    }
    return this.#get(name);
  }
}
