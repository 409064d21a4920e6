/**
 * Between `node:http` and web-standard `Request`/`Response`: the MCP SDK's HTTP transport speaks the web
 * types, and `node:http` is the server API that Node, Deno, Bun and a Bun-compiled binary all provide.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";

/** The request body, or "too large" once it exceeds `maxBytes` (nothing past the cap is kept). */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<Uint8Array | "too large"> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) return "too large";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Uint8Array).length;
    if (size > maxBytes) return "too large";
    chunks.push(chunk as Uint8Array);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  return body;
}

/** A web `Request` with the headers of `req` (the body, already read, travels separately). */
export function toWebRequest(req: IncomingMessage, url: URL): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return new Request(url, { method: req.method, headers });
}

/**
 * A signal that fires when the client of `res` goes away (or the response is done). Take it as the request
 * arrives: `res` emits "close" once, and a client that leaves while the response is still being produced
 * (an event stream's GET aborted at once) would otherwise go unnoticed and hold its session open for good.
 */
export function clientGone(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  res.once("close", () => gone.abort());
  return gone.signal;
}

/**
 * Writes a web `Response` to `res`, streaming its body (server-sent events arrive as they are produced)
 * and respecting back-pressure. Resolves when the body has ended or the client went away (`gone`, from
 * `clientGone` taken when the request arrived).
 */
export async function sendResponse(
  res: ServerResponse,
  response: Response,
  gone: AbortSignal = clientGone(res),
): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  const onGone = () => void reader.cancel().catch(() => {});
  if (gone.aborted) onGone();
  else gone.addEventListener("abort", onGone, { once: true });
  try {
    while (!gone.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const resume = () => (res.off("drain", resume), res.off("close", resume), resolve());
          res.on("drain", resume).on("close", resume);
          if (gone.aborted) resume();
        });
      }
    }
  } catch {
    // The stream was cancelled because the client went away, or the transport closed it: nothing to send.
  } finally {
    gone.removeEventListener("abort", onGone);
    if (!res.writableEnded) res.end();
  }
}

/** Sends a JSON-RPC error body with `status` (the shape MCP clients expect from a refused request). */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
  code = -32000,
): void {
  const body = JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(body);
}
