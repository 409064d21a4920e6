/**
 * The headers every dashboard answer carries, and its JSON answers: nothing is sniffed, framed, sent on
 * in a Referer or read by another origin.
 * @module
 */
import type { ServerResponse } from "node:http";

/** Headers on every answer. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

/** The CSP of a file the dashboard hands out (an image, an artifact): nothing in it may run or load. */
export const FILE_CSP = "default-src 'none'; sandbox";

/** A JSON answer. */
export function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
  });
  res.end(text);
}
