/**
 * A server's whole `tools/list`, read page by page and leniently (each tool is checked on its own by
 * `admitTools`, so one malformed tool spoils no other), stopping once the tool cap is passed: a server
 * that pages for ever, or lists a million tools, costs the cap's worth of parsing and no more.
 * @module
 */
import type { Client } from "@modelcontextprotocol/client";
import * as z from "zod";
import { type AdmittedTools, admitTools, TOOL_CAPS, type ToolCaps } from "./tool_caps.ts";

/** Pages of one tools/list walked at most (the SDK's own default is 64). */
export const MAX_LIST_PAGES = 1000;

/** A tools/list page as codemode reads it: the tools unchecked, for admitTools to check one by one. */
const PAGE = z.object({ tools: z.array(z.unknown()), nextCursor: z.string().optional() }).loose();

/** Lists every page of `client`'s tools (each request within `timeoutMs`) and admits them under `caps`. */
export async function listTools(
  client: Client,
  options: { timeoutMs: number; caps?: ToolCaps },
): Promise<AdmittedTools> {
  const caps = options.caps ?? TOOL_CAPS;
  const listed: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 1;; page++) {
    const request = {
      method: "tools/list" as const,
      ...(cursor === undefined ? {} : { params: { cursor } }),
    };
    const reply = await client.request(request, PAGE, { timeout: options.timeoutMs });
    for (const tool of reply.tools) listed.push(tool);
    const next = reply.nextCursor;
    if (next === undefined || next === cursor || listed.length > caps.maxTools) break;
    if (page >= MAX_LIST_PAGES) {
      throw new Error(`its tools/list went on past ${MAX_LIST_PAGES} pages; the listing was abandoned`);
    }
    cursor = next;
  }
  return await admitTools(listed, caps);
}
