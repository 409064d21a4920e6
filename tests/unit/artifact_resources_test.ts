/**
 * Artifacts through the MCP server with an in-memory client: resource_link items after the text, the
 * compact text naming each, resources/list and resources/read (text or blob), list_changed, and another
 * session's URI reading as not found. The runner is a fake that stores files as a run would.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { type CodeRunner, createMcpServer } from "../../core/serve/mcp_server.ts";
import { compact } from "../../plugins/output/compact.ts";
import { json } from "../../plugins/output/json.ts";
import { ArtifactStores } from "../../core/artifacts/stores.ts";
import type { ArtifactStore } from "../../core/artifacts/store.ts";
import type { ArtifactLink } from "../../core/contracts/output.ts";

async function keep(store: ArtifactStore, path: string, bytes: Uint8Array): Promise<ArtifactLink> {
  const incoming = await store.receive(path, bytes.length);
  if ("reason" in incoming) throw new Error(incoming.note);
  await incoming.write(bytes);
  const info = await incoming.commit();
  if ("reason" in info) throw new Error(info.note);
  return store.link(info);
}

/** A runner that "runs" by keeping the files a script names, as a sandbox's artifacts would arrive. */
const runner: CodeRunner = {
  async run(_key, code, options) {
    const artifacts: ArtifactLink[] = [];
    for (const [path, text] of Object.entries(JSON.parse(code) as Record<string, string | number[]>)) {
      const bytes = typeof text === "string" ? new TextEncoder().encode(text) : Uint8Array.from(text);
      artifacts.push(await keep(options.artifacts!, path, bytes));
    }
    return { status: "ok", stdout: "", stderr: "", duration: 0, ...(artifacts.length ? { artifacts } : {}) };
  },
};

async function connect(store: ArtifactStore, output = compact()) {
  const server = createMcpServer({
    runner,
    output,
    defaultTimeout: 30,
    maxTimeout: 120,
    capabilities: () => "",
    preload: () => Promise.resolve([]),
    sessionKey: "k",
    version: "1",
    artifacts: store,
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const changed: unknown[] = [];
  const client = new Client({ name: "t", version: "1" });
  client.setNotificationHandler("notifications/resources/list_changed", (n) => void changed.push(n));
  await client.connect(b);
  return { client, changed, close: () => Promise.all([client.close(), server.close()]) };
}

Deno.test("a run's artifacts come as resource_link items, are listed, and read back as text or blob", async () => {
  const stores = new ArtifactStores(mkdtempSync(join(tmpdir(), "codemode-res-")), {
    maxFile: 1e6,
    maxTotal: 1e7,
  });
  const store = stores.open();
  const { client, changed, close } = await connect(store);
  try {
    const code = JSON.stringify({
      "out/table.csv": "a,b\n1,2\n",
      "plot.png": [0x89, 0x50, 0x4e, 0x47, 0, 255],
    });
    const r = await client.callTool({ name: "run_python", arguments: { code } });
    const content = r.content as {
      type: string;
      text?: string;
      uri?: string;
      name?: string;
      mimeType?: string;
      size?: number;
    }[];
    assert.equal(content[0].type, "text");
    assert.match(
      content[0].text!,
      /^artifact: out\/table\.csv \(text\/csv, 8 bytes\) codemode:\/\/artifacts\/[0-9a-f]{32}\/out\/table\.csv\n/,
    );
    assert.deepEqual(content.slice(1), [
      {
        type: "resource_link",
        uri: store.uri("out/table.csv"),
        name: "out/table.csv",
        mimeType: "text/csv",
        size: 8,
      },
      { type: "resource_link", uri: store.uri("plot.png"), name: "plot.png", mimeType: "image/png", size: 6 },
    ]);
    assert.equal(changed.length, 1, "the client hears that the resource list changed");

    const { resources } = await client.listResources();
    assert.deepEqual(
      resources.filter((x) => x.uri.startsWith("codemode://artifacts/")).map((
        x,
      ) => [x.name, x.mimeType, x.size]),
      [
        ["out/table.csv", "text/csv", 8],
        ["plot.png", "image/png", 6],
      ],
    );
    const text = await client.readResource({ uri: store.uri("out/table.csv") });
    assert.deepEqual(text.contents, [{
      uri: store.uri("out/table.csv"),
      mimeType: "text/csv",
      text: "a,b\n1,2\n",
    }]);
    const blob = await client.readResource({ uri: store.uri("plot.png") });
    assert.deepEqual(blob.contents, [{
      uri: store.uri("plot.png"),
      mimeType: "image/png",
      blob: "iVBORwD/",
    }]);

    const other = stores.open();
    await keep(other, "plot.png", new Uint8Array([1]));
    for (
      const uri of [
        other.uri("plot.png"),
        store.uri("missing.txt"),
        store.uri("plot.png").replace(store.id, store.id.toUpperCase()),
      ]
    ) {
      await assert.rejects(client.readResource({ uri }), /not found/i, uri);
    }
  } finally {
    await close();
    await stores.closeAll();
  }
});

Deno.test("structured output lists the artifacts in every output format", async () => {
  const stores = new ArtifactStores(mkdtempSync(join(tmpdir(), "codemode-res-")), {
    maxFile: 1e6,
    maxTotal: 1e7,
  });
  const store = stores.open();
  const { client, close } = await connect(store, json());
  try {
    const r = await client.callTool({
      name: "run_python",
      arguments: { code: JSON.stringify({ "a.txt": "x" }) },
    });
    const artifacts = (r.structuredContent as { artifacts: ArtifactLink[] }).artifacts;
    assert.deepEqual(artifacts, [{
      uri: store.uri("a.txt"),
      name: "a.txt",
      mimeType: "text/plain",
      size: 1,
    }]);
  } finally {
    await close();
    await stores.closeAll();
  }
});
