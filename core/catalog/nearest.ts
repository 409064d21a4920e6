/**
 * "Did you mean": the names nearest to one that was misspelt (a tool, a server, an argument), for the
 * pre-run check's fixes. Spellings that differ only in case, `_` or `-` come first; then fuse.js's fuzzy
 * score, the same library that ranks search.
 * @module
 */
import Fuse from "fuse.js";

/** Most candidates compared: a server with more tools than this is searched by its first ones only. */
const MAX_CANDIDATES = 5000;

/** Up to `limit` names of `candidates` close to `name`, nearest first; none when nothing is close. */
export function nearest(name: string, candidates: readonly string[], limit = 3): string[] {
  const pool = [...new Set(candidates.slice(0, MAX_CANDIDATES))].filter((c) => c !== name);
  const loose = (s: string) => s.toLowerCase().replace(/[-_]/g, "");
  const same = pool.filter((c) => loose(c) === loose(name));
  const fuzzy = new Fuse(pool, { includeScore: true, threshold: 0.4, ignoreLocation: true })
    .search(name.slice(0, 64))
    .map((hit) => hit.item);
  return [...new Set([...same, ...fuzzy])].slice(0, limit);
}
