/**
 * The one error the OAuth pieces raise when a server cannot be used until its user logs in again: no
 * tokens yet, a refresh the authorization server refused, a 401 a refresh could not cure. Its message
 * names the command that fixes it, because it reaches the agent's Python code as an exception.
 * @module
 */

/** A remote MCP server needs `codemode auth login <server>` before it can be used. */
export class NeedsLoginError extends Error {
  /** The server's configured name. */
  readonly server: string;

  /** `reason` says what happened, in a clause that follows "needs a login: ". */
  constructor(server: string, reason: string, options?: ErrorOptions) {
    super(`MCP server "${server}" needs a login: ${reason}; run \`${loginCommand(server)}\``, options);
    this.name = "NeedsLoginError";
    this.server = server;
  }
}

/** The command that logs in to `server`, quoted for a shell when its name needs it. */
export function loginCommand(server: string): string {
  return `codemode auth login ${
    /^[\w.@%+=:,/-]+$/.test(server) ? server : `'${server.replace(/'/g, `'\\''`)}'`
  }`;
}
