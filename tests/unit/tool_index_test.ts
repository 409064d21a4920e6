import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { Tool } from "@modelcontextprotocol/client";
import {
  searchFields,
  splitWords,
  type ToolDoc,
  toolDoc,
  toolFull,
  toolSummary,
} from "../../core/catalog/docs.ts";
import { queryTerms, stemOf, ToolIndex } from "../../core/catalog/index.ts";

function catalog(name: string): ToolDoc[] {
  const url = new URL(`../testdata/catalogs/${name}.json`, import.meta.url);
  const { server, tools } = JSON.parse(readFileSync(url, "utf8")) as { server: string; tools: Tool[] };
  return tools.map((tool) => toolDoc(server, tool));
}

const docs = [...catalog("everything"), ...catalog("filesystem"), ...catalog("memory")];
const index = new ToolIndex(docs);
const top = (query: string, options = {}) => index.search(query, options).map((h) => `${h.server}/${h.tool}`);

Deno.test("splitWords() splits snake, kebab, dotted and spaced names", () => {
  assert.deepEqual(splitWords("read_text_file"), ["read", "text", "file"]);
  assert.deepEqual(splitWords("gzip-file-as-resource"), ["gzip", "file", "as", "resource"]);
  assert.deepEqual(splitWords("leads.list"), ["leads", "list"]);
  assert.deepEqual(splitWords("Read the file."), ["read", "the", "file"]);
});

Deno.test("splitWords() splits camelCase, acronyms and digits and keeps the joined form", () => {
  assert.deepEqual(splitWords("getFileInfo"), ["get", "file", "info", "getfileinfo"]);
  assert.deepEqual(splitWords("HTMLParser"), ["html", "parser", "htmlparser"]);
  assert.deepEqual(splitWords("v2api"), ["v", "2", "api", "v2api"]);
  assert.deepEqual(splitWords("getFileInfo", { joined: false }), ["get", "file", "info"]);
});

Deno.test("searchFields() covers server, name, title, description, parameter names and their docs", () => {
  const doc = toolDoc("my-server", {
    name: "listDirectory",
    title: "List Directory",
    description: "Get a listing",
    inputSchema: { type: "object", properties: { sortBy: { type: "string", description: "Order entries" } } },
  });
  const fields = searchFields(doc);
  assert.deepEqual(fields.server, ["my", "server"]);
  assert.deepEqual(fields.name, ["list", "directory", "listdirectory"]);
  assert.deepEqual(fields.title, ["list", "directory"]);
  assert.deepEqual(fields.description, ["get", "a", "listing"]);
  assert.deepEqual(fields.params, ["sort", "by", "sortby"]);
  assert.deepEqual(fields.paramDocs, ["order", "entries"]);
});

Deno.test("toolFull() gives a Python signature with required parameters first and defaults", () => {
  const full = toolFull(toolDoc("everything", {
    name: "echo-it",
    description: "Echoes",
    inputSchema: {
      type: "object",
      properties: {
        count: { type: "integer", default: 3 },
        message: { type: "string" },
        mode: { enum: ["a", "b"] },
        tags: { type: "array", items: { type: "string" } },
        flag: { type: ["boolean", "null"], default: false },
      },
      required: ["message"],
    },
  }));
  assert.equal(
    full.signature,
    'echo_it(*, message: str, count: int = 3, mode: Literal["a", "b"] = ..., tags: list[str] = ..., ' +
      "flag: bool | None = False)",
  );
  assert.equal(full.alias, "echo_it");
  assert.deepEqual(toolSummary(toolDoc("s", { name: "t", inputSchema: { type: "object" } })), {
    server: "s",
    tool: "t",
    alias: "t",
    description: "",
  });
});

Deno.test("search finds tools by the words of their names", () => {
  assert.equal(top("read file")[0], "filesystem/read_file");
  assert.equal(top("list directory")[0], "filesystem/list_directory");
  assert.equal(top("get_file_info")[0], "filesystem/get_file_info");
});

Deno.test("search finds tools by words that appear only in their descriptions", () => {
  assert.equal(top("rename a file")[0], "filesystem/move_file");
  assert.equal(top("glob pattern")[0], "filesystem/search_files");
  assert.equal(top("sum of two numbers")[0], "everything/get-sum");
  assert.equal(top("MCP logo")[0], "everything/get-tiny-image");
});

Deno.test("search tolerates typos", () => {
  assert.match(top("raed file")[0], /^filesystem\/read_(text_)?file$/);
  assert.equal(top("lsit directory")[0], "filesystem/list_directory");
  assert.equal(top("ecoh")[0], "everything/echo");
  assert.ok(top("observatoins").slice(0, 2).includes("memory/add_observations"));
});

Deno.test("search matches camelCase queries and parameter names word by word", () => {
  assert.equal(top("getFileInfo")[0], "filesystem/get_file_info");
  assert.equal(top("dryRun")[0], "filesystem/edit_file");
  assert.equal(top("entityNames")[0], "memory/delete_entities");
});

Deno.test("search meets plurals and singulars", () => {
  assert.equal(stemOf("entities"), stemOf("entity"));
  assert.equal(stemOf("directories"), stemOf("directory"));
  assert.equal(top("delete entity")[0], "memory/delete_entities");
});

Deno.test("search restricted to a server returns only that server's tools", () => {
  const hits = index.search("read", { server: "memory", limit: 20 });
  assert.ok(hits.length > 0);
  assert.ok(hits.every((h) => h.server === "memory"));
  assert.equal(hits[0].tool, "read_graph");
});

Deno.test("search returns at most limit hits", () => {
  assert.equal(index.search("file", { limit: 3 }).length, 3);
  assert.equal(index.search("file", { limit: 0 }).length, 0);
  assert.ok(index.search("file").length <= 10);
});

Deno.test("search scores are between 0 and 1, best first, and a closer match scores higher", () => {
  const hits = index.search("read file", { limit: 20 });
  for (const h of hits) assert.ok(h.score > 0 && h.score <= 1, `score ${h.score}`);
  for (let i = 1; i < hits.length; i++) assert.ok(hits[i - 1].score >= hits[i].score);
  const exact = index.search("read file")[0].score;
  const typo = index.search("raed file")[0].score;
  assert.ok(exact > typo, `exact ${exact} should beat typo ${typo}`);
  assert.equal(exact, 1);
});

Deno.test("search hits carry the tool's description", () => {
  const [hit] = index.search("echo");
  assert.deepEqual(Object.keys(hit).sort(), ["description", "score", "server", "tool"]);
  assert.equal(hit.description, "Echoes back the input string");
});

Deno.test("search with nothing to match returns no hits", () => {
  assert.deepEqual(index.search(""), []);
  assert.deepEqual(index.search("   "), []);
  assert.deepEqual(index.search("zzqxv"), []);
  assert.deepEqual(new ToolIndex([]).search("read file"), []);
});

Deno.test("queryTerms() drops stopwords and one-letter fragments unless nothing else is left", () => {
  assert.deepEqual(queryTerms("read the file"), ["read", "file"]);
  assert.deepEqual(queryTerms("the"), ["the"]);
  assert.deepEqual(queryTerms("stop ec2"), ["stop", "ec", "ec2"]);
});
