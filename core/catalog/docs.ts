/**
 * Tool docs: what codemode keeps about one upstream tool, the words search looks at, and the summary and
 * full views that `query_tool_docs` and `codemode tools` show.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import { pythonAlias } from "../python_alias.ts";
import { signatureLine } from "./stubs.ts";

/** One upstream tool, as the doc index stores it. */
export interface ToolDoc {
  server: string;
  tool: string;
  title?: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  /** `"skill"` for a skill: `server` is `"skills"` and `tool` its name (or `<server>/<name>` upstream). */
  kind?: "skill";
  /** More text to search, weighted low: a skill's SKILL.md. */
  body?: string;
  /** When the tool appeared, if it came after the server's first listing (`notifications/tools/list_changed`). */
  addedAt?: string;
}

/**
 * The longest description a summary or a search hit carries; `detail="full"` has the whole text (itself
 * capped when the server is listed, see core/upstream/tool_caps.ts). A summary is for picking a tool.
 */
export const SUMMARY_CHARS = 1_000;
/** How much of a description (and of each parameter's) search indexes: enough to find a tool by. */
export const INDEX_CHARS = 2_000;
/** Parameters whose names and descriptions search indexes, per tool. */
const INDEX_PARAMS = 100;

/** The `server` of every skill's doc: skills are searched with the tools and told apart by it. */
export const SKILLS_SERVER = "skills";

/** The short view of a tool: enough to pick one. */
export interface ToolSummary {
  server: string;
  tool: string;
  /** The Python attribute name of the tool's proxy. */
  alias: string;
  title?: string;
  description: string;
  /** When the tool appeared, if it came after the server's first listing. */
  addedAt?: string;
}

/** The full view of a tool: enough to call it. */
export interface ToolFull extends ToolSummary {
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  /** The tool's Python signature from its stub, e.g. `echo(*, message: str, count: int = 3)`. */
  signature: string;
}

/** The words of a tool doc, per field, lower-cased; search weighs each field differently. */
export interface SearchFields {
  server: string[];
  name: string[];
  title: string[];
  description: string[];
  params: string[];
  paramDocs: string[];
  body: string[];
}

/** The field names of {@link SearchFields}, in a fixed order. */
export const SEARCH_FIELDS = [
  "server",
  "name",
  "title",
  "description",
  "params",
  "paramDocs",
  "body",
] as const;

/** One searchable field of a tool doc. */
export type SearchField = typeof SEARCH_FIELDS[number];

/** Turns an MCP `Tool` from `tools/list` into a doc for the given server. */
export function toolDoc(server: string, tool: Tool, addedAt?: string): ToolDoc {
  const doc: ToolDoc = { server, tool: tool.name };
  const title = tool.title ?? tool.annotations?.title;
  if (title) doc.title = title;
  if (tool.description) doc.description = tool.description;
  if (tool.inputSchema) doc.inputSchema = tool.inputSchema as Record<string, unknown>;
  if (tool.outputSchema) doc.outputSchema = tool.outputSchema as Record<string, unknown>;
  if (tool.annotations) doc.annotations = tool.annotations as Record<string, unknown>;
  if (addedAt) doc.addedAt = addedAt;
  return doc;
}

/**
 * Splits an identifier or a phrase into lower-case words: on `_`, `-`, `.`, spaces and other punctuation,
 * at camelCase humps (`getFileInfo`, `HTMLParser`) and between letters and digits (`v2api`). A segment that
 * splits further is also kept whole (`s3`, `getfileinfo`), so queries that spell it joined still match,
 * unless `joined` is false.
 */
export function splitWords(text: string, options: { joined?: boolean } = {}): string[] {
  const words: string[] = [];
  for (const segment of text.match(SEGMENT) ?? []) {
    // Most words of a description are plain lower-case; they need no further splitting.
    if (LOWER.test(segment)) {
      words.push(segment);
      continue;
    }
    const parts = segment.match(PART) ?? [];
    for (const part of parts) words.push(part.toLowerCase());
    if (parts.length > 1 && options.joined !== false) words.push(segment.toLowerCase());
  }
  return words;
}

const SEGMENT = /[\p{L}\p{N}]+/gu;
const LOWER = /^[a-z]+$/;
/** Upper-case runs before a capitalised word (HTML|Parser), capitalised or lower words, digit runs. */
const PART = /\p{Lu}+(?=\p{Lu}\p{Ll})|\p{Lu}?\p{Ll}+|\p{Lu}+|\p{N}+|[\p{L}\p{N}]+/gu;

/**
 * The words of every searchable field of a doc, from a bounded prefix of each text (INDEX_CHARS), so the
 * index costs the same for a tool whose description is a megabyte as for one whose description is a page.
 */
export function searchFields(doc: ToolDoc): SearchFields {
  const properties = Object.entries(schemaProperties(doc.inputSchema)).slice(0, INDEX_PARAMS);
  const paramDocs: string[] = [];
  for (const [, property] of properties) {
    if (typeof property?.description === "string") paramDocs.push(...words(property.description));
  }
  return {
    server: splitWords(doc.server),
    name: words(doc.tool),
    title: words(doc.title ?? ""),
    description: words(doc.description ?? ""),
    params: properties.flatMap(([name]) => words(name)),
    paramDocs,
    body: doc.body ? words(doc.body) : [],
  };
}

function words(text: string): string[] {
  return splitWords(text.length > INDEX_CHARS ? text.slice(0, INDEX_CHARS) : text);
}

/** A description cut to SUMMARY_CHARS, with "…" where it was cut. */
export function summaryText(description: string | undefined): string {
  const text = description ?? "";
  return text.length > SUMMARY_CHARS ? `${text.slice(0, SUMMARY_CHARS - 1)}…` : text;
}

/** All searchable words of a doc as one string (for display and debugging). */
export function searchText(doc: ToolDoc): string {
  const fields = searchFields(doc);
  return SEARCH_FIELDS.map((field) => fields[field].join(" ")).filter(Boolean).join(" ");
}

/** The summary view of a doc. */
export function toolSummary(doc: ToolDoc): ToolSummary {
  const summary: Omit<ToolSummary, "description"> = {
    server: doc.server,
    tool: doc.tool,
    alias: pythonAlias(doc.tool),
  };
  if (doc.title) summary.title = summaryText(doc.title);
  return {
    ...summary,
    description: summaryText(doc.description),
    ...(doc.addedAt ? { addedAt: doc.addedAt } : {}),
  };
}

/** The full view of a doc, with its schema and a Python-style signature. */
export function toolFull(doc: ToolDoc): ToolFull {
  const inputSchema = doc.inputSchema ?? { type: "object", properties: {} };
  const full: ToolFull = {
    ...toolSummary(doc),
    ...(doc.title ? { title: doc.title } : {}),
    description: doc.description ?? "",
    inputSchema,
    signature: signatureLine(doc),
  };
  if (doc.outputSchema) full.outputSchema = doc.outputSchema;
  if (doc.annotations) full.annotations = doc.annotations;
  return full;
}

type Schema = Record<string, unknown> & { description?: unknown };

function schemaProperties(schema: Record<string, unknown> | undefined): Record<string, Schema> {
  const properties = schema?.properties;
  return properties && typeof properties === "object" ? properties as Record<string, Schema> : {};
}
