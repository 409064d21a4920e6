/**
 * Between `node:http` and web-standard `Request`/`Response`: the MCP SDK's HTTP transport speaks the web
 * types, and `node:http` is the server API that Node, Deno, Bun and a Bun-compiled binary all provide.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";

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
 * Writes a web `Response` to `res`, streaming its body (server-sent events arrive as they are produced)
 * and respecting back-pressure. Resolves when the body has ended or the client went away.
 */
export async function sendResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  let gone = false;
  const onClose = () => {
    gone = true;
    void reader.cancel().catch(() => {});
  };
  res.once("close", onClose);
  // A client that left while the response was being produced (an event stream's GET aborted at once)
  // closed `res` before this listened: without this check the stream, and its session, stay open for good.
  if (res.destroyed) onClose();
  try {
    while (!gone) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const resume = () => (res.off("drain", resume), res.off("close", resume), resolve());
          res.on("drain", resume).on("close", resume);
        });
      }
    }
  } catch {
    // The stream was cancelled because the client went away, or the transport closed it: nothing to send.
  } finally {
    res.off("close", onClose);
    if (!res.writableEnded) res.end();
  }
}

/**
 * Streams a file's bytes to `res` after its head was written. Resolves when they are sent or the client
 * went away, even before this was called (the file would otherwise stay open for good); rejects if the
 * file cannot be read.
 */
export async function sendFileBody(res: ServerResponse, body: Readable): Promise<void> {
  if (res.destroyed) return void body.destroy();
  await new Promise<void>((resolve, reject) => {
    body.once("error", reject);
    res.once("close", resolve);
    body.pipe(res);
  });
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
