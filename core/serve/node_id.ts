/**
 * A node's identity in a fleet, and the session ids it mints. A balancer routes a request by the node its
 * `Mcp-Session-Id` names (`<node>.<random>`), so a session always reaches the node that holds its sandbox
 * without the balancer keeping any state; a node recognises ids it did not mint and answers them `404`.
 * @module
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { NODE_ID_PATTERN } from "../config/settings.ts";

export { NODE_ID_PATTERN };

/** The variable that names the node. */
export const NODE_ID_ENV = "CODEMODE_NODE_ID";

/** Random bytes in a session id: 192 bits, well over the 128 an id must carry to be unguessable. */
const SESSION_RANDOM_BYTES = 24;

/** Thrown when neither CODEMODE_NODE_ID nor the host name gives a valid node id. */
export class NodeIdError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = "NodeIdError";
  }
}

/**
 * The node id: `configured` (CODEMODE_NODE_ID) when set, else the host name lower-cased. Throws a
 * NodeIdError naming the variable when the result is not a DNS label.
 */
export function resolveNodeId(configured: string | undefined, host: string = hostname()): string {
  if (configured !== undefined && configured !== "") {
    if (NODE_ID_PATTERN.test(configured)) return configured;
    throw new NodeIdError(
      `Invalid ${NODE_ID_ENV}="${configured}": expected lowercase letters, digits and inner hyphens, ` +
        "1 to 63 characters (a DNS label such as node-1)",
    );
  }
  const fallback = host.toLowerCase();
  if (NODE_ID_PATTERN.test(fallback)) return fallback;
  throw new NodeIdError(
    `The host name "${host}" is not a valid node id (lowercase letters, digits and inner hyphens, 1 to 63 ` +
      `characters): set ${NODE_ID_ENV}, e.g. ${NODE_ID_ENV}=node-1`,
  );
}

/** A fresh session id of `node`: `<node>.<32 url-safe characters>`. */
export function mintSessionId(node: string): string {
  return `${node}.${randomBytes(SESSION_RANDOM_BYTES).toString("base64url")}`;
}

/** The node a session id names, or undefined for an id without a node prefix. */
export function nodeOfSession(sessionId: string): string | undefined {
  const dot = sessionId.indexOf(".");
  if (dot <= 0) return undefined;
  const node = sessionId.slice(0, dot);
  return NODE_ID_PATTERN.test(node) ? node : undefined;
}
