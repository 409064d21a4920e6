/**
 * Artifacts under `serve --http`: `GET /artifacts/<session>/<path>` downloads one with the same Host,
 * Origin and token checks as `/mcp` and only for the MCP session that made it; one session can never read
 * another's artifacts, over HTTP or over MCP; ending a session deletes them. Real podman sandboxes, real
 * SDK clients.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { request } from "node:http";
import { hostname } from "node:os";
import { join } from "node:path";
import { fakeHome } from "./_serve.ts";
import { connectHttp, type HttpClient, type HttpServe, startHttpServe } from "./_serve_http.ts";
import { processFolderName } from "../../core/artifacts/stores.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED artifacts over HTTP: podman or image ${TEST_IMAGE} missing`);

const TOKEN = "artifact-token-5e1f7a20";
const auth = { authorization: `Bearer ${TOKEN}` };
const home = fakeHome();
let served: HttpServe | undefined;
const server = async () =>
  served ??= await startHttpServe(home, { CODEMODE_RUNTIME: "podman", CODEMODE_HTTP_TOKEN: TOKEN });

/** One raw GET, so tests can send what SDK clients never would. */
function get(
  url: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: Uint8Array; headers: Record<string, unknown> }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: target.hostname, port: target.port, path, method: "GET", headers }, (res) => {
      const chunks: Uint8Array[] = [];
      res.on("data", (d) => chunks.push(d)).on("end", () => {
        const body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of chunks) (body.set(c, at), at += c.length);
        resolve({ status: res.statusCode!, body, headers: res.headers });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/** Makes one artifact in a session; returns its URI and the download path. */
async function makeArtifact(
  c: HttpClient,
  name: string,
  content: string,
): Promise<{ uri: string; path: string }> {
  const r = await c.client.callTool(
    {
      name: "run_python",
      arguments: {
        code: `from mcp import runtime\nruntime.save_artifact(${JSON.stringify(name)}, ${
          JSON.stringify(content)
        })`,
      },
    },
    { timeout: 180_000 },
  );
  const link = (r.content as { type: string; uri?: string; name?: string }[]).find((i) =>
    i.type === "resource_link"
  );
  assert.ok(link?.uri, JSON.stringify(r.content));
  return { uri: link.uri, path: `/artifacts/${link.uri.slice("codemode://artifacts/".length)}` };
}

Deno.test({
  name: "GET /artifacts downloads only with the right token, Host and Mcp-Session-Id; sessions never cross",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { url, pid } = await server();
    const port = new URL(url).port;
    const a = await connectHttp(url, auth);
    const b = await connectHttp(url, auth);
    try {
      const content = "id,value\n1,é\n";
      const { uri, path } = await makeArtifact(a, "report/data.csv", content);
      const own = { ...auth, "mcp-session-id": a.sessionId() };

      const ok = await get(url, path, own);
      assert.equal(ok.status, 200);
      assert.equal(new TextDecoder().decode(ok.body), content);
      assert.equal(ok.headers["content-type"], "text/csv");
      assert.equal(ok.headers["content-length"], String(new TextEncoder().encode(content).length));
      assert.match(String(ok.headers["content-disposition"]), /^attachment; filename="data\.csv"/);
      assert.equal(ok.headers["x-content-type-options"], "nosniff");
      assert.match(String(ok.headers["content-security-policy"]), /sandbox/);

      const refused: [string, Record<string, string>, number][] = [
        ["no token", { "mcp-session-id": a.sessionId() }, 401],
        ["a wrong token", { authorization: "Bearer wrong", "mcp-session-id": a.sessionId() }, 401],
        ["a foreign Host", { ...own, host: `attacker.example:${port}` }, 403],
        ["a foreign Origin", { ...own, origin: "http://attacker.example" }, 403],
        ["no Mcp-Session-Id", auth, 400],
        ["another session's id", { ...auth, "mcp-session-id": b.sessionId() }, 404],
        ["an unknown session id", { ...auth, "mcp-session-id": "0".repeat(36) }, 404],
      ];
      for (const [what, headers, status] of refused) {
        const r = await get(url, path, headers);
        assert.equal(r.status, status, `${what}: ${new TextDecoder().decode(r.body)}`);
        assert.ok(!new TextDecoder().decode(r.body).includes("1,é"), `${what} leaked the file`);
      }
      // Traversal and other sessions' names, with a's own session id.
      for (
        const bad of [
          `/artifacts/${uri.split("/")[3]}/../../../../etc/passwd`,
          `/artifacts/${uri.split("/")[3]}/%2e%2e/%2e%2e/etc/passwd`,
          `/artifacts/${uri.split("/")[3]}/report%2F..%2F..%2Fx`,
          `/artifacts/${"f".repeat(32)}/report/data.csv`,
          `/artifacts/${uri.split("/")[3]}/report/.hidden`,
        ]
      ) {
        assert.equal((await get(url, bad, own)).status, 404, bad);
      }

      // The other session cannot read or list a's artifact over MCP either.
      await assert.rejects(b.client.readResource({ uri }), /not found/i);
      const listed = (await b.client.listResources()).resources.map((r) => r.uri);
      assert.ok(!listed.includes(uri));
      assert.equal(((await a.client.readResource({ uri })).contents[0] as { text: string }).text, content);

      // Ending a's session deletes its artifacts: the download goes, and so do the files.
      const folder = join(home, "state", "artifacts", processFolderName(hostname(), pid));
      assert.ok(readdirSync(folder).includes(uri.split("/")[3]));
      await a.end();
      assert.equal((await get(url, path, own)).status, 404);
      assert.equal(existsSync(join(folder, uri.split("/")[3])), false, "a's artifacts outlived its session");
    } finally {
      await Promise.allSettled([a.end(), b.end()]);
    }
  },
});

Deno.test({
  name: "serve --http removes every session's artifacts when it stops",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s = await server();
    const c = await connectHttp(s.url, auth);
    await makeArtifact(c, "kept.txt", "until the server stops");
    const folder = join(home, "state", "artifacts", processFolderName(hostname(), s.pid));
    assert.ok(existsSync(folder));
    assert.equal(await s.stop(), 0);
    served = undefined;
    assert.equal(existsSync(folder), false);
  },
});
