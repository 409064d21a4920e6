/**
 * The node:http <-> web bridge: the body cap, declared and streamed, header conversion, and responses to
 * clients that left.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { readBody, sendFileBody, sendResponse, toWebRequest } from "../../core/serve/node_http_bridge.ts";

function fakeRequest(chunks: string[], headers: Record<string, string | string[]> = {}): IncomingMessage {
  const encoder = new TextEncoder();
  return Object.assign(
    (async function* () {
      for (const c of chunks) yield encoder.encode(c);
    })(),
    { headers, method: "POST" },
  ) as unknown as IncomingMessage;
}

Deno.test("a body within the cap is returned whole, across chunks", async () => {
  const body = await readBody(fakeRequest(['{"a":', "1}"]), 16);
  assert.equal(new TextDecoder().decode(body as Uint8Array), '{"a":1}');
});

Deno.test("a declared length over the cap is refused before anything is read", async () => {
  let read = false;
  const req = Object.assign(
    (async function* () {
      read = true;
      yield new Uint8Array(1);
    })(),
    { headers: { "content-length": "17" } },
  ) as unknown as IncomingMessage;
  assert.equal(await readBody(req, 16), "too large");
  assert.equal(read, false);
});

Deno.test("a streamed body that grows past the cap is refused", async () => {
  assert.equal(await readBody(fakeRequest(["0123456789", "0123456789"]), 16), "too large");
  assert.notEqual(await readBody(fakeRequest(["0123456789", "012345"]), 16), "too large");
});

Deno.test("repeated headers are joined and the method is kept", () => {
  const req = fakeRequest([], { accept: "application/json", "x-many": ["a", "b"] });
  const web = toWebRequest(req, new URL("http://127.0.0.1:1/mcp"));
  assert.equal(web.method, "POST");
  assert.equal(web.headers.get("accept"), "application/json");
  assert.equal(web.headers.get("x-many"), "a, b");
});

/**
 * Answers one GET only after its client has left ("close" has already fired when `respond` runs), and says
 * whether `respond`'s promise then settles within 2 s.
 */
async function respondsAfterClientLeft(respond: (res: ServerResponse) => Promise<void>): Promise<boolean> {
  let sent: Promise<void> | undefined;
  const server = createServer((_req, res) => void res.once("close", () => (sent = respond(res))));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const port = (server.address() as { port: number }).port;
    const client = request({ host: "127.0.0.1", port, path: "/", method: "GET" });
    client.on("error", () => {});
    client.end();
    await new Promise((resolve) => setTimeout(resolve, 100));
    client.destroy();
    const deadline = Date.now() + 5_000;
    while (!sent && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(sent, "the server saw the client leave");
    return await Promise.race([
      sent.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 2_000)),
    ]);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

Deno.test("a stream whose client left before the response was ready still ends (no session held open)", async () => {
  let cancelled = false;
  const ended = await respondsAfterClientLeft((res) => {
    const endless = new ReadableStream<Uint8Array>({ cancel: () => void (cancelled = true) });
    return sendResponse(res, new Response(endless, { headers: { "content-type": "text/event-stream" } }));
  });
  assert.equal(ended, true, "sendResponse returned once the client was gone");
  assert.equal(cancelled, true, "the body stream was cancelled");
});

Deno.test("a file sent to a client that already left ends at once and frees the file", async () => {
  let destroyed = false;
  const ended = await respondsAfterClientLeft((res) => {
    const body = new Readable({ read() {}, destroy: (_e, done) => (destroyed = true, done(null)) });
    res.writeHead(200, { "content-length": "10" });
    return sendFileBody(res, body);
  });
  assert.equal(ended, true, "sendFileBody returned once the client was gone");
  assert.equal(destroyed, true, "the file's stream was destroyed");
});
