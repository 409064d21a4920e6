import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tool } from "@modelcontextprotocol/client";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { type CatalogProgress, specKey, ToolCatalog } from "../../core/catalog/catalog.ts";
import { runSearch } from "../../cli/search.ts";
import { runTools } from "../../cli/tools.ts";

function spec(name: string, extra: Partial<ServerSpec> = {}): ServerSpec {
  return {
    name,
    transport: "stdio",
    command: "node",
    args: [`${name}.js`],
    source: { plugin: "test", file: "/tmp/mcp.json", key: `mcpServers.${name}` },
    ...extra,
  };
}

function tools(server: string, ...names: string[]): Tool[] {
  return names.map((name) => ({
    name,
    description: `The ${name.replaceAll("_", " ")} tool of ${server}`,
    inputSchema: {
      type: "object",
      properties: { path: { type: "string", description: "Where" } },
      required: ["path"],
    },
  }));
}

const TOOLS: Record<string, Tool[]> = {
  files: tools("files", "read_file", "write_file"),
  notes: tools("notes", "create_note", "delete_note"),
  clock: tools("clock", "current_time"),
};

/** A fake lister that records its calls. */
function recordingLister(byName: Record<string, Tool[]> = TOOLS) {
  const calls: string[] = [];
  const lister = (s: ServerSpec) => {
    calls.push(s.name);
    const found = byName[s.name];
    return found ? Promise.resolve(found) : Promise.reject(new Error(`no server "${s.name}"`));
  };
  return { calls, lister };
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => resolve = r);
  return { promise, resolve };
}

async function withStateDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "codemode-catalog-test-"));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

Deno.test("catalog lists every configured server and serves docs, summaries and full docs", () =>
  withStateDir(async (stateDir) => {
    const { lister } = recordingLister();
    const catalog = new ToolCatalog([spec("files"), spec("notes")], lister, { stateDir });
    await catalog.ready();
    assert.deepEqual(catalog.docs().map((d) => `${d.server}/${d.tool}`), [
      "files/read_file",
      "files/write_file",
      "notes/create_note",
      "notes/delete_note",
    ]);
    assert.deepEqual(catalog.summaries("notes").map((s) => s.tool), ["create_note", "delete_note"]);
    const [full] = catalog.full("files", "read_file");
    assert.equal(full.signature, "read_file(*, path: str)");
    assert.deepEqual(catalog.full("files").length, 2);
    assert.deepEqual(catalog.status().map((s) => [s.server, s.state, s.tools]), [
      ["files", "ready", 2],
      ["notes", "ready", 2],
    ]);
  }));

Deno.test("a second catalog with the same spec reads the cache and never calls the lister", () =>
  withStateDir(async (stateDir) => {
    const first = recordingLister();
    await new ToolCatalog([spec("files")], first.lister, { stateDir }).ready();
    assert.deepEqual(first.calls, ["files"]);

    const second = recordingLister();
    const catalog = new ToolCatalog([spec("files")], second.lister, { stateDir });
    await catalog.ready();
    assert.deepEqual(second.calls, []);
    assert.equal(catalog.status()[0].state, "cached");
    assert.equal((await catalog.search("write file"))[0].tool, "write_file");
  }));

Deno.test("changing a server's args, env or url indexes it again; moving its config file does not", () =>
  withStateDir(async (stateDir) => {
    await new ToolCatalog([spec("files")], recordingLister().lister, { stateDir }).ready();
    const variants: [Partial<ServerSpec>, boolean][] = [
      [{ args: ["files.js", "--root", "/srv"] }, true],
      [{ env: { TOKEN: "x" } }, true],
      [{ cwd: "/elsewhere" }, true],
      [{ source: { plugin: "cursor", file: "/other/mcp.json", key: "mcpServers.files" } }, false],
      [{ env: {} }, false],
      [{ description: "Files", timeoutMs: 5000 }, false],
    ];
    for (const [change, relists] of variants) {
      const { calls, lister } = recordingLister();
      await new ToolCatalog([spec("files", change)], lister, { stateDir }).ready();
      assert.equal(calls.length, relists ? 1 : 0, `change ${JSON.stringify(change)}`);
    }
    assert.notEqual(specKey(spec("a", { url: "http://x" })), specKey(spec("a", { url: "http://y" })));
    assert.notEqual(specKey(spec("a", { headers: { A: "1" } })), specKey(spec("a")));
    assert.equal(
      specKey(spec("a", { env: { A: "1", B: "2" } })),
      specKey(spec("a", { env: { B: "2", A: "1" } })),
    );
  }));

Deno.test("a corrupted cache file is ignored, the server is listed again and the file rewritten", () =>
  withStateDir(async (stateDir) => {
    const file = join(stateDir, "tool-docs", `${specKey(spec("files"))}.json`);
    await new ToolCatalog([spec("files")], recordingLister().lister, { stateDir }).ready();
    for (const garbage of ["{not json", JSON.stringify({ version: 1, tools: "nope" }), "null"]) {
      await writeFile(file, garbage);
      const { calls, lister } = recordingLister();
      const catalog = new ToolCatalog([spec("files")], lister, { stateDir });
      await catalog.ready();
      assert.deepEqual(calls, ["files"]);
      assert.equal(catalog.docs().length, 2);
      assert.equal(JSON.parse(await readFile(file, "utf8")).tools.length, 2);
    }
  }));

Deno.test("cache writes leave no temporary files behind", () =>
  withStateDir(async (stateDir) => {
    await new ToolCatalog([spec("files"), spec("notes")], recordingLister().lister, { stateDir }).ready();
    const names = await readdir(join(stateDir, "tool-docs"));
    assert.equal(names.length, 2);
    assert.ok(names.every((n) => /^[0-9a-f]{32}\.json$/.test(n)), names.join(", "));
  }));

Deno.test("a failing server is recorded as failed while the others are indexed, and start() never throws", () =>
  withStateDir(async (stateDir) => {
    const { lister } = recordingLister();
    const catalog = new ToolCatalog([spec("files"), spec("broken"), spec("notes")], lister, { stateDir });
    await catalog.start();
    const byName = Object.fromEntries(catalog.status().map((s) => [s.server, s]));
    assert.equal(byName.broken.state, "failed");
    assert.equal(byName.broken.error, 'no server "broken"');
    assert.equal(byName.files.state, "ready");
    assert.equal(byName.notes.state, "ready");
    assert.equal((await catalog.search("note"))[0].server, "notes");
    // Failures are not cached: the next start tries again.
    const again = recordingLister();
    await new ToolCatalog([spec("files"), spec("broken")], again.lister, { stateDir }).ready();
    assert.deepEqual(again.calls, ["broken"]);
  }));

Deno.test("a server whose listing hangs fails after the timeout", () =>
  withStateDir(async (stateDir) => {
    const never = () => new Promise<Tool[]>(() => {});
    const catalog = new ToolCatalog([spec("slow")], never, { stateDir, timeoutMs: 30 });
    await catalog.ready();
    assert.equal(catalog.status()[0].state, "failed");
    assert.match(catalog.status()[0].error ?? "", /"slow" took over 30 ms/);
  }));

Deno.test("listing runs with bounded concurrency", () =>
  withStateDir(async (stateDir) => {
    let running = 0, peak = 0;
    const lister = async (s: ServerSpec) => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
      return tools(s.name, "ping");
    };
    const specs = Array.from({ length: 9 }, (_, i) => spec(`s${i}`));
    const catalog = new ToolCatalog(specs, lister, { stateDir, concurrency: 3 });
    await catalog.ready();
    assert.equal(peak, 3);
    assert.equal(catalog.docs().length, 9);
  }));

Deno.test("search before indexing finishes returns what is ready", () =>
  withStateDir(async (stateDir) => {
    const slow = deferred<Tool[]>();
    const lister = (s: ServerSpec) => s.name === "clock" ? slow.promise : Promise.resolve(TOOLS[s.name]);
    const catalog = new ToolCatalog([spec("files"), spec("clock")], lister, { stateDir });
    catalog.start();
    await catalog.ready("files");
    assert.equal((await catalog.search("read file"))[0].tool, "read_file");
    assert.deepEqual(await catalog.search("current time"), []);
    assert.equal(catalog.status().find((s) => s.server === "clock")?.state, "indexing");
    slow.resolve(TOOLS.clock);
    await catalog.ready();
    assert.equal((await catalog.search("current time"))[0].tool, "current_time");
  }));

Deno.test("refresh() replaces a server's docs with a new tool list and rewrites the cache", () =>
  withStateDir(async (stateDir) => {
    const first = recordingLister();
    const catalog = new ToolCatalog([spec("notes")], first.lister, { stateDir });
    await catalog.ready();
    await catalog.refresh("notes", tools("notes", "archive_note"));
    assert.deepEqual(catalog.docs().map((d) => d.tool), ["archive_note"]);
    assert.equal((await catalog.search("archive"))[0].tool, "archive_note");

    const later = recordingLister();
    const reread = new ToolCatalog([spec("notes")], later.lister, { stateDir });
    await reread.ready();
    assert.deepEqual(later.calls, []);
    assert.deepEqual(reread.docs().map((d) => d.tool), ["archive_note"]);

    await catalog.refresh("notes");
    assert.deepEqual(catalog.docs().map((d) => d.tool), ["create_note", "delete_note"]);
    await assert.rejects(() => catalog.refresh("nope"), /Unknown server "nope"/);
  }));

Deno.test("progress reports every server once as done, with the total", () =>
  withStateDir(async (stateDir) => {
    await new ToolCatalog([spec("files")], recordingLister().lister, { stateDir }).ready();
    const events: CatalogProgress[] = [];
    const catalog = new ToolCatalog(
      [spec("files"), spec("notes"), spec("broken")],
      recordingLister().lister,
      {
        stateDir,
        onProgress: (p) => events.push(p),
      },
    );
    await catalog.ready();
    const settled = events.filter((e) => e.state !== "indexing");
    assert.deepEqual(settled.map((e) => [e.done, e.total]), [[1, 3], [2, 3], [3, 3]]);
    assert.deepEqual(Object.fromEntries(settled.map((e) => [e.server, e.state])), {
      files: "cached",
      notes: "ready",
      broken: "failed",
    });
    assert.deepEqual(events.filter((e) => e.state === "indexing").map((e) => e.server), ["notes", "broken"]);
  }));

Deno.test("close() settles servers still waiting for a listing slot as failed", () =>
  withStateDir(async (stateDir) => {
    const gate = deferred<Tool[]>();
    const listing = deferred<void>();
    const lister = () => {
      listing.resolve();
      return gate.promise;
    };
    const catalog = new ToolCatalog([spec("a"), spec("b"), spec("c")], lister, { stateDir, concurrency: 1 });
    catalog.start();
    // Closed while "a" holds the one listing slot (however long a loaded machine took to get there).
    await listing.promise;
    await catalog.close();
    gate.resolve(tools("a", "ping"));
    await catalog.ready();
    assert.deepEqual(catalog.status().map((s) => s.state), ["ready", "failed", "failed"]);
  }));

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, stdout: (s: string) => out.push(s), stderr: (s: string) => err.push(s) };
}

Deno.test("runSearch --json prints hits best first and builds missing servers silently off a terminal", () =>
  withStateDir(async (stateDir) => {
    const io = capture();
    const { calls, lister } = recordingLister();
    const code = await runSearch("read file", { limit: 2, json: true }, {
      specs: [spec("files"), spec("notes")],
      stateDir,
      lister,
      isTTY: false,
      ...io,
    });
    assert.equal(code, 0);
    assert.deepEqual(calls.sort(), ["files", "notes"]);
    assert.deepEqual(io.err, []);
    const hits = JSON.parse(io.out.join(""));
    assert.equal(hits.length, 2);
    assert.deepEqual(Object.keys(hits[0]).sort(), ["description", "score", "server", "tool"]);
    assert.equal(hits[0].tool, "read_file");
    assert.ok(hits[0].score >= hits[1].score);
  }));

Deno.test("runSearch prints a table, filters by server and reports unknown servers and failures", () =>
  withStateDir(async (stateDir) => {
    const deps = { specs: [spec("files"), spec("notes"), spec("broken")], stateDir, isTTY: false };
    const table = capture();
    const code = await runSearch("note", { limit: 5, server: "notes", json: false }, {
      ...deps,
      lister: recordingLister().lister,
      ...table,
    });
    assert.equal(code, 0);
    const text = table.out.join("");
    assert.match(text, /create_note/);
    assert.doesNotMatch(text, /read_file/);
    assert.ok(!text.includes("\u001b["), "no colour off a terminal");

    const unknown = capture();
    assert.equal(
      await runSearch("x", { limit: 5, server: "nope", json: true }, {
        ...deps,
        lister: recordingLister().lister,
        ...unknown,
      }),
      1,
    );
    assert.match(unknown.err.join(""), /Unknown server "nope"/);

    const failing = capture();
    assert.equal(
      await runSearch("file", { limit: 5, json: true }, {
        ...deps,
        lister: recordingLister().lister,
        ...failing,
      }),
      0,
    );
    assert.match(failing.err.join(""), /Could not list the tools of "broken": no server "broken"/);

    const bad = capture();
    assert.equal(
      await runSearch("file", { limit: 0, json: true }, {
        ...deps,
        lister: recordingLister().lister,
        ...bad,
      }),
      2,
    );
  }));

Deno.test("runTools lists a server's tools with signatures, as JSON or a table", () =>
  withStateDir(async (stateDir) => {
    const deps = {
      specs: [spec("files"), spec("broken")],
      stateDir,
      isTTY: false,
      lister: recordingLister().lister,
    };
    const json = capture();
    assert.equal(await runTools("files", { json: true }, { ...deps, ...json }), 0);
    const listed = JSON.parse(json.out.join(""));
    assert.deepEqual(listed.map((t: { signature: string }) => t.signature), [
      "read_file(*, path: str)",
      "write_file(*, path: str)",
    ]);

    const table = capture();
    assert.equal(await runTools("files", { json: false }, { ...deps, ...table }), 0);
    assert.match(table.out.join(""), /files: 2 tools, called as mcp_files\.<tool>/);
    assert.match(table.out.join(""), /write_file\(\*, path: str\)/);

    const broken = capture();
    assert.equal(await runTools("broken", { json: true }, { ...deps, ...broken }), 1);
    assert.match(broken.err.join(""), /Could not list the tools of "broken"/);
    assert.equal(await runTools("nope", { json: true }, { ...deps, ...capture() }), 1);
  }));

Deno.test("runSearch colours a terminal's table unless NO_COLOR is set", () =>
  withStateDir(async (stateDir) => {
    const deps = { specs: [spec("files")], stateDir, isTTY: true, lister: recordingLister().lister };
    await new ToolCatalog(deps.specs, deps.lister, { stateDir }).ready();
    const previous = process.env.NO_COLOR;
    try {
      delete process.env.NO_COLOR;
      const coloured = capture();
      assert.equal(await runSearch("read", { limit: 1, json: false }, { ...deps, ...coloured }), 0);
      assert.ok(coloured.out.join("").includes("\u001b["));
      process.env.NO_COLOR = "1";
      const plain = capture();
      assert.equal(await runSearch("read", { limit: 1, json: false }, { ...deps, ...plain }), 0);
      assert.ok(!plain.out.join("").includes("\u001b["));
      assert.match(plain.out.join(""), /read_file/);
    } finally {
      if (previous === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = previous;
    }
  }));

Deno.test("skills are searched with the tools: local ones set by the store, published ones listed and cached", () =>
  withStateDir(async (stateDir) => {
    const { lister } = recordingLister();
    const published: string[] = [];
    const skillLister = (s: ServerSpec) => {
      published.push(s.name);
      return Promise.resolve(
        s.name === "notes"
          ? [{ name: "meeting-minutes", description: "Write up the minutes of a meeting" }]
          : [],
      );
    };
    const catalog = new ToolCatalog([spec("files"), spec("notes")], lister, { stateDir, skillLister });
    await catalog.ready();
    catalog.setSkillDocs([{
      server: "ignored",
      tool: "tide-tables",
      description: "Predict high water at a harbour",
      body: "predict port",
    }]);
    const [tide] = await catalog.search("harbour high water", { limit: 1 });
    assert.deepEqual(tide, {
      server: "skills",
      tool: "tide-tables",
      description: "Predict high water at a harbour",
      score: tide.score,
      kind: "skill",
    });
    assert.equal(
      (await catalog.search("minutes of a meeting", { limit: 1 }))[0].tool,
      "notes/meeting-minutes",
    );
    assert.deepEqual(
      (await catalog.search("minutes", { server: "notes" })).filter((h) => h.kind === "skill"),
      [],
    );
    // A second catalog reads both tools and published skills from the cache, starting nothing.
    const second = recordingLister();
    const cached = new ToolCatalog([spec("files"), spec("notes")], second.lister, { stateDir, skillLister });
    await cached.ready();
    assert.deepEqual(second.calls, []);
    assert.deepEqual(cached.skillDocs().map((d) => d.tool), ["notes/meeting-minutes"]);
    assert.deepEqual(published, ["files", "notes"]);
  }));

Deno.test("a server whose skills cannot be listed still has its tools", () =>
  withStateDir(async (stateDir) => {
    const { lister } = recordingLister();
    const catalog = new ToolCatalog([spec("files")], lister, {
      stateDir,
      skillLister: () => Promise.reject(new Error("skills/list exploded")),
    });
    await catalog.ready();
    assert.equal(catalog.status()[0].state, "ready");
    assert.equal(catalog.docs().length, 2);
  }));

Deno.test("a server added after start-up is searchable at once, listed or with its tools given, and can be dropped", async () => {
  await withStateDir(async (stateDir) => {
    const { calls, lister } = recordingLister();
    const catalog = new ToolCatalog([spec("files")], lister, { stateDir });
    await catalog.ready();
    await catalog.addServer(spec("notes"));
    assert.deepEqual(calls, ["files", "notes"], "listed once when added");
    assert.equal((await catalog.search("create note"))[0]?.server, "notes");
    await catalog.addServer(spec("clock"), TOOLS.clock);
    assert.deepEqual(calls, ["files", "notes"], "given tools are not listed again");
    assert.equal((await catalog.search("current time"))[0]?.tool, "current_time");
    assert.deepEqual(catalog.servers(), ["files", "notes", "clock"]);
    await assert.rejects(catalog.addServer(spec("notes")), /is in the catalog already/);
    assert.equal(catalog.removeServer("notes"), true);
    assert.equal(catalog.removeServer("notes"), false);
    assert.notEqual((await catalog.search("create note"))[0]?.server, "notes");
    assert.deepEqual(catalog.servers(), ["files", "clock"]);
  });
});

Deno.test("toolsChanged() re-lists after a quiet spell, at most once per interval, and marks tools that appeared later", async () => {
  await withStateDir(async (stateDir) => {
    const listed = { files: tools("files", "read_file") };
    const { calls, lister } = recordingLister(listed);
    const catalog = new ToolCatalog([spec("files")], lister, {
      stateDir,
      debounceMs: 30,
      refreshIntervalMs: 400,
    });
    await catalog.ready();
    assert.deepEqual(calls, ["files"]);
    listed.files = tools("files", "read_file", "write_file");
    // A flood of notices: one listing after the quiet spell, none for the rest of the interval.
    for (let i = 0; i < 500; i++) catalog.toolsChanged("files");
    await new Promise((r) => setTimeout(r, 150));
    assert.deepEqual(calls, ["files", "files"]);
    for (let i = 0; i < 500; i++) catalog.toolsChanged("files");
    await new Promise((r) => setTimeout(r, 150));
    assert.deepEqual(calls, ["files", "files"], "a second listing within the interval");
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(calls, ["files", "files", "files"]);
    const [added] = catalog.summaries("files").filter((s) => s.addedAt);
    assert.equal(added.tool, "write_file");
    assert.equal(catalog.summaries("files").find((s) => s.tool === "read_file")?.addedAt, undefined);
    const [hit] = await catalog.search("write file");
    assert.equal(hit.tool, "write_file");
    assert.equal(hit.addedAt, added.addedAt);
    await catalog.close();
  });
});

Deno.test("a listing's problems are kept with the server's status and in the cache; summaries stay bounded", async () => {
  await withStateDir(async (stateDir) => {
    const long = {
      name: "long_doc",
      description: "word ".repeat(5000),
      inputSchema: { type: "object" as const },
    };
    const listing = {
      tools: [...tools("files", "read_file"), long],
      problems: [{
        tool: "deep",
        problem: "its inputSchema is nested more than 64 levels deep",
        leftOut: true,
      }],
    };
    await new ToolCatalog([spec("files")], () => Promise.resolve(listing), { stateDir }).ready();
    const cached = new ToolCatalog([spec("files")], () => Promise.reject(new Error("not again")), {
      stateDir,
    });
    await cached.ready();
    const [status] = cached.status();
    assert.equal(status.state, "cached");
    assert.deepEqual(status.problems, listing.problems);
    const summary = cached.summaries("files").find((s) => s.tool === "long_doc")!;
    assert.ok(summary.description.length <= 1000 && summary.description.endsWith("…"));
    assert.equal(cached.full("files", "long_doc")[0].description.length, 25_000);
    const hits = await cached.search("word", { limit: 1 });
    assert.ok(hits[0].description.length <= 1000);
  });
});
