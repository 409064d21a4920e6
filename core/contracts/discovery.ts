/**
 * The discovery plugin contract: reading the MCP server lists that MCP clients keep in config files.
 * @module
 */

/** Where a server definition came from. */
export interface Provenance {
  /** Discovery plugin name, e.g. "claude". */
  plugin: string;
  /** Absolute path of the file. */
  file: string;
  /** Key path inside the file, e.g. `mcpServers.github` or `projects["/app"].mcpServers.db`. */
  key: string;
  /** Scope within the client, when the client has scopes (user, project, local, workspace). */
  scope?: string;
}

/** One MCP server as a client config describes it, normalised. */
export interface ServerSpec {
  name: string;
  transport: "stdio" | "http" | "sse";
  /** stdio: the executable and its arguments. */
  command?: string;
  args?: string[];
  /** stdio: extra environment on top of codemode's safe base environment. */
  env?: Record<string, string>;
  cwd?: string;
  /** http/sse: the endpoint and extra headers. */
  url?: string;
  headers?: Record<string, string>;
  description?: string;
  /** Per-call timeout the client config asks for, in milliseconds. */
  timeoutMs?: number;
  source: Provenance;
  /** Other places that defined a server of the same name and lost on precedence. */
  shadowed?: Provenance[];
}

/** A problem with one file or one server in it; never fatal to discovery. */
export interface Diagnostic {
  severity: "error" | "warning";
  file: string;
  server?: string;
  message: string;
}

/** Facts about the machine that decide where config files live. */
export interface DiscoveryContext {
  home: string;
  cwd: string;
  platform: string;
  env: Record<string, string | undefined>;
}

/** What a plugin read from one file. */
export interface DiscoveryResult {
  servers: ServerSpec[];
  diagnostics: Diagnostic[];
}

/** A discovery plugin: one MCP client's config format. */
export interface DiscoveryPlugin {
  readonly name: string;
  /** Existing files this client keeps servers in, highest precedence last. Never throws. */
  candidates(context: DiscoveryContext): Promise<string[]>;
  /** Reads one file; a broken file yields diagnostics, never an exception. */
  read(path: string, context: DiscoveryContext): Promise<DiscoveryResult>;
}
