/**
 * A deterministic synthetic tool catalog for the search benchmark: N (default 1,200) realistic tools across
 * 50 servers, with each server's own naming style (snake_case, kebab-case, camelCase, dotted), varied
 * descriptions and parameters. Run `deno run -A scripts/synthetic_catalog.ts [count]` to print it as JSON.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import seeds from "../tests/testdata/catalogs/synthetic_seeds.json" with { type: "json" };

/** One server's tools in the synthetic catalog. */
export interface SyntheticServer {
  server: string;
  tools: Tool[];
}

type Style = "snake" | "kebab" | "camel" | "dotted";

interface ServerSeed {
  name: string;
  product: string;
  style: Style;
  /** Where things live, e.g. "in a GitHub repository"; completes descriptions. */
  where: string;
  /** `noun: field, field` */
  nouns: string[];
  /** `verb phrase: Description.: param, param` */
  extras: string[];
}

/**
 * Server seeds: `nouns` are `noun: field, field` (each gets list/get/create/update/delete/search tools),
 * `extras` are `verb phrase: Description.: param, param` (one tool each).
 */
const SERVERS = seeds as ServerSeed[];

/** Deterministic pseudo-random numbers (mulberry32). */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function plural(noun: string): string {
  if (/[^aeiou]y$/.test(noun)) return noun.slice(0, -1) + "ies";
  if (/(s|x|ch|sh)$/.test(noun)) return noun + "es";
  return noun + "s";
}

function identifier(words: string[], style: Style): string {
  const parts = words.flatMap((w) => w.split(" "));
  switch (style) {
    case "snake":
      return parts.join("_");
    case "kebab":
      return parts.join("-");
    case "camel":
      return parts.map((p, i) => i === 0 ? p : p[0].toUpperCase() + p.slice(1)).join("");
    case "dotted":
      return parts.length > 1 ? `${parts.slice(1).join("_")}.${parts[0]}` : parts[0];
  }
}

function param(
  name: string,
  style: Style,
  description: string,
  type = "string",
): [string, Record<string, string>] {
  const key = style === "camel" ? identifier([name], "camel") : name.replaceAll(" ", "_");
  return [key, { type, description }];
}

const CRUD = ["list", "get", "create", "update", "delete", "search"] as const;

type Pick = <T>(items: readonly T[]) => T;

function crudTool(seed: ServerSeed, verb: typeof CRUD[number], spec: string, pick: Pick): Tool {
  const [noun, fieldList = "name"] = spec.split(": ");
  const fields = fieldList.split(", ");
  const many = plural(noun);
  const id = param(`${noun} id`, seed.style, `ID of the ${noun}`);
  const fieldParams = fields.map((f) =>
    param(f, seed.style, `${f[0].toUpperCase()}${f.slice(1)} of the ${noun}`)
  );
  const where = seed.where;
  const table = {
    list: {
      words: ["list", many],
      text: pick([
        `List ${many} ${where}.`,
        `Returns a paginated list of ${many} ${where}.`,
        `Enumerate ${many} ${where}, newest first.`,
      ]) +
        pick(["", ` Supports filtering by ${fields[0]}.`, " Use the cursor to page through results."]),
      params: [
        param("limit", seed.style, "Maximum number of results", "integer"),
        param("cursor", seed.style, "Pagination cursor from a previous call"),
      ],
    },
    get: {
      words: ["get", noun],
      text: pick([
        `Get a single ${noun} by ID.`,
        `Fetch the details of a ${noun} ${where}.`,
        `Retrieve one ${noun} including its ${fields.join(", ")}.`,
      ]),
      params: [id],
    },
    create: {
      words: ["create", noun],
      text: pick([`Create a new ${noun} ${where}.`, `Add a ${noun} ${where}. Returns the created ${noun}.`]),
      params: fieldParams,
    },
    update: {
      words: ["update", noun],
      text: pick([
        `Update an existing ${noun}.`,
        `Modify fields of a ${noun} ${where}.`,
        `Edit a ${noun}; only the given fields change.`,
      ]),
      params: [id, ...fieldParams],
    },
    delete: {
      words: ["delete", noun],
      text: pick([`Delete a ${noun} permanently.`, `Remove a ${noun} ${where}. This cannot be undone.`]),
      params: [id],
    },
    search: {
      words: ["search", many],
      text: pick([
        `Search ${many} by keyword ${where}.`,
        `Full-text search over ${many} in ${seed.product}.`,
      ]),
      params: [
        param("query", seed.style, "Search terms"),
        param("limit", seed.style, "Maximum number of results", "integer"),
      ],
    },
  }[verb];
  const required = verb === "list" ? [] : [table.params[0][0]];
  return tool(identifier(table.words, seed.style), table.text, table.params, required);
}

function extraTool(seed: ServerSeed, spec: string): Tool {
  const [phrase, text, paramList = ""] = spec.split(": ");
  const params = paramList ? paramList.split(", ").map((p) => param(p, seed.style, `The ${p}`)) : [];
  const name = seed.style === "dotted" ? phrase.replaceAll(" ", "_") : identifier([phrase], seed.style);
  return tool(name, text, params, params.slice(0, 1).map(([key]) => key));
}

function tool(
  name: string,
  description: string,
  params: [string, Record<string, string>][],
  required: string[],
): Tool {
  return {
    name,
    description,
    inputSchema: { type: "object", properties: Object.fromEntries(params), required },
  };
}

/** Every tool a server seed can produce, in a stable shuffled order. */
function serverTools(seed: ServerSeed, pick: Pick, rand: () => number): Tool[] {
  const tools = [
    ...seed.nouns.flatMap((noun) => CRUD.map((verb) => crudTool(seed, verb, noun, pick))),
    ...seed.extras.map((extra) => extraTool(seed, extra)),
  ];
  for (let i = tools.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [tools[i], tools[j]] = [tools[j], tools[i]];
  }
  return tools;
}

/** Builds the synthetic catalog: `count` tools taken round-robin from the servers; same input, same output. */
export function syntheticCatalog(count = 1200, seed = 1): SyntheticServer[] {
  const rand = random(seed);
  const pick: Pick = (items) => items[Math.floor(rand() * items.length)];
  const pools = SERVERS.map((server) => ({ server: server.name, tools: serverTools(server, pick, rand) }));
  const longest = Math.max(...pools.map((pool) => pool.tools.length));
  const out = new Map<string, Tool[]>();
  let taken = 0;
  // Past the end of the pools, further instances of the same servers follow (e.g. a second GitHub account).
  for (let instance = 1; taken < count; instance++) {
    for (let round = 0; round < longest && taken < count; round++) {
      for (const pool of pools) {
        const tool = pool.tools[round];
        if (!tool || taken >= count) continue;
        const name = instance === 1 ? pool.server : `${pool.server}-${instance}`;
        out.set(name, [...(out.get(name) ?? []), tool]);
        taken++;
      }
    }
  }
  return [...out].map(([server, tools]) => ({ server, tools }));
}

if (import.meta.main) {
  const count = Number(process.argv[2] ?? 1200);
  console.log(JSON.stringify(syntheticCatalog(count), null, 2));
}
