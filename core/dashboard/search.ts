/**
 * The dashboard's search: `codemode search` over a tool catalog (and the skills it holds), with the tools
 * the policy refuses left out (more hits are asked for, so refused tools don't leave the list short).
 * @module
 */
import type { ToolCatalog } from "../catalog/catalog.ts";
import type { SearchHit } from "../catalog/index.ts";
import type { Policy } from "../config/policy.ts";

/** A search function over `catalog` under `policy`. */
export function policySearch(
  catalog: ToolCatalog,
  policy: Policy,
): (query: string, limit: number) => Promise<SearchHit[]> {
  return async (query, limit) => {
    if (policy.open) return await catalog.search(query, { limit });
    const annotations = new Map(catalog.docs().map((d) => [`${d.server}\0${d.tool}`, d.annotations]));
    return (await catalog.search(query, { limit: Math.max(100, limit) }))
      .filter((hit) =>
        hit.kind === "skill" ||
        policy.allowsTool(hit.server, hit.tool, annotations.get(`${hit.server}\0${hit.tool}`)).ok
      )
      .slice(0, limit);
  };
}
