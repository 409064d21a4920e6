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

/**
 * How a remote server is logged in to with OAuth, in the shape Claude Code and VS Code write under a
 * server's `oauth` key. Everything is optional: without it codemode registers itself dynamically.
 */
export interface OAuthSettings {
  /** A client registered with the authorization server beforehand (servers without dynamic registration). */
  clientId?: string;
  /** That client's secret, when it has one (better as `${VAR}` than written out). */
  clientSecret?: string;
  /** Scopes to ask for, space-separated; by default the ones the server's metadata lists. */
  scopes?: string;
  /** A fixed port for the loopback redirect, for an app registered with one callback URL. */
  callbackPort?: number;
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
  /** http/sse: OAuth client settings for `codemode auth login`. */
  oauth?: OAuthSettings;
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
