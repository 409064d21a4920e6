/**
 * Errors the upstream pool raises. Each names the server (and the tool, when there is one) and says what
 * to do next, because the message reaches the agent's Python code as the text of an exception.
 * @module
 */
import {
  InsufficientScopeError,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
} from "@modelcontextprotocol/client";
import { loginCommand, NeedsLoginError } from "../auth/needs_login.ts";
import { redact } from "./redact.ts";

/** JSON-RPC error code the stdio transport uses for a reply it had to drop for being too large. */
export const MESSAGE_TOO_LARGE = -32099;

/** Base class: something went wrong talking to an upstream MCP server. */
export class UpstreamError extends Error {
  /** The server's configured name. */
  readonly server: string;
  /** The tool being called, when the failure belongs to a call. */
  readonly tool?: string;

  constructor(message: string, server: string, tool?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.server = server;
    this.tool = tool;
  }
}

/** The pool has no server of that name. */
export class UnknownServerError extends UpstreamError {
  constructor(server: string, known: string[]) {
    const list = known.length ? known.map((name) => `"${name}"`).join(", ") : "none";
    super(`Unknown MCP server "${server}": configured servers are ${list}`, server);
  }
}

/** The server could not be started or did not finish the MCP handshake. */
export class UpstreamStartError extends UpstreamError {}

/** The server process ended (or the connection dropped) while a call was in flight. */
export class UpstreamExitedError extends UpstreamError {}

/** A call took longer than its timeout; the request was cancelled on the server. */
export class UpstreamTimeoutError extends UpstreamError {
  /** The timeout that expired, in milliseconds. */
  readonly timeoutMs: number;

  constructor(server: string, tool: string, timeoutMs: number) {
    super(
      `The call to "${tool}" on MCP server "${server}" timed out after ${timeoutMs} ms and was cancelled; ` +
        `raise the server's timeout or ask for less work per call`,
      server,
      tool,
    );
    this.timeoutMs = timeoutMs;
  }
}

/** The caller aborted the call. */
export class UpstreamCancelledError extends UpstreamError {}

/** The server's reply was larger than the transport accepts. */
export class UpstreamResultTooLargeError extends UpstreamError {}

/** The server answered with a JSON-RPC error or with a result that is not valid MCP. */
export class UpstreamCallError extends UpstreamError {}

/** The pool was closed; no more calls are accepted. */
export class UpstreamClosedError extends UpstreamError {}

/** The remote server needs `codemode auth login <server>` before it can be used. */
export class UpstreamAuthError extends UpstreamError {}

/** The NeedsLoginError behind `error` (itself or a cause), if there is one. */
export function needsLogin(error: unknown): NeedsLoginError | undefined {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof NeedsLoginError) return e;
  }
  return undefined;
}

/**
 * Whether `error` (itself or a cause) is the SDK's "Server returned 401 after re-authentication": the
 * transport called the auth provider back on a 401 and its retry got 401 again.
 */
export function unauthorizedAfterRefresh(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof SdkHttpError && e.code === SdkErrorCode.ClientHttpAuthentication) return true;
  }
  return false;
}

/** What is known about a failed call when its error is explained. */
export interface FailureContext {
  server: string;
  tool: string;
  /** The timeout the call ran under. */
  timeoutMs: number;
  /** How the session ended, if it has ("exited (code 3)", "lost the connection (...)"). */
  ended?: string;
  /** A remote server is reconnected, a local one restarted. */
  remote: boolean;
  /** The last lines the server wrote to stderr. */
  stderrTail?: string;
  /** The server's configured secrets (`secretsOf`), redacted from everything the message quotes. */
  secrets?: readonly string[];
}

/** Turns whatever the MCP SDK threw for a call into an `UpstreamError` naming the server and the tool. */
export function explainCallFailure(error: unknown, context: FailureContext): UpstreamError {
  const { server, tool } = context;
  if (error instanceof UpstreamError) return error;
  const secrets = context.secrets ?? [];
  const options = { cause: error };
  const login = needsLogin(error);
  if (login) return new UpstreamAuthError(redact(login.message, secrets), server, tool, options);
  if (error instanceof InsufficientScopeError) {
    // The scope comes from the server's challenge: shown only when it is a well-formed scope list.
    const scope = /^[\x21\x23-\x5B\x5D-\x7E ]{1,200}$/.test(error.requiredScope ?? "")
      ? error.requiredScope
      : undefined;
    return new UpstreamAuthError(
      `MCP server "${server}" refused the call to "${tool}": the login lacks ` +
        (scope ? `the scope "${scope}"` : "a scope the tool needs") +
        `; add it to the server's oauth.scopes and run \`${loginCommand(server)}\``,
      server,
      tool,
      options,
    );
  }
  const closed = error instanceof SdkError && error.code === SdkErrorCode.ConnectionClosed;
  if (context.ended || closed) {
    return new UpstreamExitedError(
      redact(
        `MCP server "${server}" ${context.ended ?? "closed the connection"} during the call to "${tool}"; ` +
          `the next call ${context.remote ? "reconnects" : "restarts"} it` +
          (context.stderrTail ? `; its stderr ends with: ${context.stderrTail}` : ""),
        secrets,
      ),
      server,
      tool,
      options,
    );
  }
  if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
    return new UpstreamTimeoutError(server, tool, context.timeoutMs);
  }
  if (error instanceof ProtocolError && error.code === MESSAGE_TOO_LARGE) {
    const detail = redact(error.message, secrets).replace(/^The server replied with /, "");
    return new UpstreamResultTooLargeError(
      `MCP server "${server}" answered the call to "${tool}" with more data than codemode accepts (${detail}); ` +
        `ask the tool for less (a page, a filter)`,
      server,
      tool,
      options,
    );
  }
  // Redacted before clipping, so that no half secret survives the cut.
  const message = redact(error instanceof Error ? error.message : String(error), secrets).replace(
    /\s+/g,
    " ",
  );
  return new UpstreamCallError(
    `MCP server "${server}" failed the call to "${tool}": ${
      message.length > 600 ? `${message.slice(0, 600)}...` : message
    }`,
    server,
    tool,
    options,
  );
}
