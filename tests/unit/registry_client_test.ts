/**
 * The registry client against a local HTTP server: the v0.1 API, the fall back to v0 paths, the short
 * cache, pages past left-out entries, and every failure as a RegistryError naming the registry's host
 * (unreachable, slow, an HTTP error, not JSON, too large, not found).
 */
import assert from "node:assert/strict";
import { RegistryClient, RegistryError } from "../../core/registry/client.ts";

interface Local {
  url: string;
  host: string;
  paths: string[];
  close(): Promise<void>;
}

/** A registry answering with `handle`, recording the paths asked for. */
function local(handle: (url: URL) => Response | Promise<Response>): Promise<Local> {
  const paths: string[] = [];
  return new Promise((resolve) => {
    const server = Deno.serve({
      port: 0,
      hostname: "127.0.0.1",
      onListen: ({ port }) =>
        resolve({
          url: `http://127.0.0.1:${port}`,
          host: `127.0.0.1:${port}`,
          paths,
          close: () => server.shutdown(),
        }),
    }, (request) => {
      const url = new URL(request.url);
      paths.push(url.pathname + url.search);
      return handle(url);
    });
  });
}

const server = (name: string, extra: Record<string, unknown> = {}) => ({
  server: { name, description: `about ${name}`, version: "1.0.0", ...extra },
  _meta: { "io.modelcontextprotocol.registry/official": { status: "active", isLatest: true } },
});

async function rejects(
  promise: Promise<unknown>,
  kind: RegistryError["kind"],
  message: RegExp,
): Promise<void> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error instanceof RegistryError, `expected a RegistryError, got ${error}`);
  assert.equal(error.kind, kind, error.message);
  assert.match(error.message, message);
}

Deno.test("search asks v0.1 for the latest versions, leaves bad entries out, and caches the answer", async () => {
  const r = await local((url) => {
    if (url.pathname !== "/v0.1/servers") return Response.json({ error: "Not found" }, { status: 404 });
    return Response.json({
      servers: [server("io.x/a"), { server: { name: "broken" } }, server("io.x/b"), server("io.x/c")],
      metadata: { count: 4 },
    });
  });
  try {
    const client = new RegistryClient(`${r.url}/`);
    const answer = await client.search("x", 2);
    assert.deepEqual(answer.entries.map((e) => e.server.name), ["io.x/a", "io.x/b"]);
    assert.equal(answer.leftOut.length, 1);
    assert.match(answer.leftOut[0].why, /not a valid server\.json/);
    assert.deepEqual(r.paths, ["/v0.1/servers?search=x&version=latest&limit=100"]);
    await client.search("x", 2);
    assert.equal(r.paths.length, 1, "the second search is answered from the cache");
    client.clear();
    await client.search("x", 2);
    assert.equal(r.paths.length, 2);
  } finally {
    await r.close();
  }
});

Deno.test("a registry without v0.1 is asked the v0 paths, and remembered as such", async () => {
  const r = await local((url) => {
    if (url.pathname === "/v0/servers") return Response.json({ servers: [server("io.x/old")] });
    if (url.pathname === "/v0/servers/io.x%2Fold/versions/latest") return Response.json(server("io.x/old"));
    return new Response("no", { status: 404 });
  });
  try {
    const client = new RegistryClient(r.url, { cacheMs: 0 });
    assert.deepEqual((await client.search("old", 5)).entries.map((e) => e.server.name), ["io.x/old"]);
    assert.equal((await client.get("io.x/old")).server.name, "io.x/old");
    assert.deepEqual(r.paths.map((p) => p.split("?")[0]), [
      "/v0.1/servers",
      "/v0/servers",
      "/v0/servers/io.x%2Fold/versions/latest",
    ]);
    await rejects(
      client.get("io.x/none", "2.0.0"),
      "not_found",
      /has no server "io\.x\/none" at version 2\.0\.0/,
    );
  } finally {
    await r.close();
  }
});

Deno.test("a second page makes up for entries left out of the first, and no more are fetched", async () => {
  const r = await local((url) => {
    const cursor = url.searchParams.get("cursor");
    if (!cursor) {
      return Response.json({
        servers: [server("io.x/a"), server("io.x/huge", { description: "z".repeat(3000) })],
        metadata: { nextCursor: "page2" },
      });
    }
    return Response.json({
      servers: [server("io.x/b"), server("io.x/c")],
      metadata: { nextCursor: "page3" },
    });
  });
  try {
    const answer = await new RegistryClient(r.url).search("x", 3);
    assert.deepEqual(answer.entries.map((e) => e.server.name), ["io.x/a", "io.x/b", "io.x/c"]);
    assert.deepEqual(answer.leftOut.map((l) => l.name), ["io.x/huge"]);
    assert.equal(r.paths.length, 2);
  } finally {
    await r.close();
  }
});

Deno.test("every failure names the registry's host and says what happened", async () => {
  let mode = "error";
  const r = await local(async () => {
    if (mode === "error") return new Response("down", { status: 503, statusText: "Service Unavailable" });
    if (mode === "html") return new Response("<html>hi</html>");
    if (mode === "shape") return Response.json({ items: [] });
    if (mode === "big") return new Response("[" + "1,".repeat(600_000) + "1]");
    if (mode === "wrong-name") return Response.json(server("io.x/other"));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    return Response.json({ servers: [] });
  });
  try {
    const client = () => new RegistryClient(r.url, { timeoutMs: 300, cacheMs: 0, maxBytes: 1_000_000 });
    const host = r.host.replaceAll(".", "\\.");
    await rejects(
      client().search("a", 1),
      "http",
      new RegExp(`registry at ${host} answered 503 Service Unavailable`),
    );
    mode = "html";
    await rejects(
      client().search("a", 1),
      "malformed",
      new RegExp(`${host} sent an answer that is not JSON`),
    );
    mode = "shape";
    await rejects(client().search("a", 1), "malformed", /a server list without a `servers` array/);
    mode = "big";
    await rejects(client().search("a", 1), "malformed", /over the 1000000-byte cap/);
    mode = "wrong-name";
    await rejects(
      client().get("io.x/asked"),
      "malformed",
      /an entry named "io\.x\/other" when "io\.x\/asked"/,
    );
    mode = "slow";
    const started = performance.now();
    await rejects(client().search("a", 1), "timeout", new RegExp(`${host} did not answer within 0\\.3 s`));
    assert.ok(performance.now() - started < 1500, "the timeout fires, the slow answer is not awaited");
  } finally {
    await r.close();
  }
  await rejects(
    new RegistryClient(r.url, { timeoutMs: 2000 }).search("a", 1),
    "unreachable",
    /could not be reached .*; check CODEMODE_REGISTRY_URL/,
  );
});
