/**
 * The tool-doc search index: typo-tolerant, multi-word search over tool names, titles, descriptions and
 * parameters.
 *
 * Each query word is matched against the index's vocabulary, not against whole docs: as typed, inflected,
 * as a prefix, and only when none of these exist, corrected (swapped letters, else fuse.js bitap over the
 * words sharing a first letter). The vocabulary of 1,000+ tools is a couple of thousand short words, so a
 * query costs well under a millisecond, and a typo in one word ("raed file") costs only that word's share
 * of the score. Matched words lead to tools through an inverted index that knows in which fields each word
 * occurs; field weights and rarity (idf) decide how much a match counts. docs/search.md has the
 * measurements behind the numbers.
 * @module
 */
import Fuse from "fuse.js";
import {
  SEARCH_FIELDS,
  type SearchField,
  searchFields,
  splitWords,
  summaryText,
  type ToolDoc,
} from "./docs.ts";

/**
 * One search result. `score` is in 0..1 and higher is better: 1 means every query word matched exactly, in
 * the best-weighted fields, and the query names every word of the tool's name.
 */
export interface SearchHit {
  server: string;
  tool: string;
  description: string;
  score: number;
  /** `"skill"` when the hit is a skill (its `server` is `"skills"`). */
  kind?: "skill";
  /** When the tool appeared, if it came after its server's first listing. */
  addedAt?: string;
}

/** Per-search options. */
export interface SearchOptions {
  /** Most results to return (default 10). */
  limit?: number;
  /** Only tools of this server. */
  server?: string;
}

/** Tuning knobs; the defaults were chosen by measurement (scripts/search_quality.ts). */
export interface ToolIndexOptions {
  /** How much a word found in each field counts. */
  weights: Record<SearchField, number>;
  /** Fuse threshold for matching a query word to an index word: 0 exact only, 1 anything. */
  threshold: number;
  /** Share of the score that rewards covering the tool name's words (so `read_file` beats `read_text_file`). */
  nameCoverage: number;
  /** How many query words' matches to remember (0 turns the cache off, for benchmarks). */
  cacheSize: number;
}

/** Tuning chosen by measurement; see docs/search.md. */
export const defaults: ToolIndexOptions = {
  weights: { server: 1, name: 1, title: 1, description: 1, params: 0.6, paramDocs: 0.1, body: 0.2 },
  threshold: 0.5,
  nameCoverage: 0.1,
  cacheSize: 1000,
};

const STOPWORDS = new Set(
  "a an and are as at be by for from how i in into is it me my of on or that the this to tool what which with"
    .split(" "),
);

/** Words handled between two checks of the clock while building. */
const STEP = 2_000;
/** Most words per first letter that typo correction looks through. */
const FUZZY_POOL = 5_000;

interface Posting {
  doc: number;
  /** Best field weight among the fields the word occurs in, plus a little for each other field. */
  weight: number;
}

/** An immutable search index over tool docs. */
export class ToolIndex {
  readonly #docs: ToolDoc[];
  readonly #options: ToolIndexOptions;
  readonly #postings = new Map<string, Posting[]>();
  readonly #idf = new Map<string, number>();
  readonly #nameWords: Set<string>[] = [];
  readonly #stems = new Map<string, string[]>();
  /** The vocabulary, sorted, for prefix lookups by binary search. */
  #sorted: string[] = [];
  /** Words by first letter: a typo rarely hits the first letter, and fuzzy-matching 1/26th of them is fast. */
  readonly #byLetter = new Map<string, string[]>();
  /** Fuse indexes per first letter, built on first need (only queries with unknown words need them). */
  readonly #fuse = new Map<string, Fuse<string>>();
  readonly #cache = new Map<string, { word: string; quality: number }[]>();
  readonly #maxWeight: number;

  /** Builds the index at once; `options` override the measured defaults. */
  constructor(docs: readonly ToolDoc[], options: Partial<ToolIndexOptions> = {}, deferred = false) {
    this.#docs = [...docs];
    this.#options = { ...defaults, ...options, weights: { ...defaults.weights, ...options.weights } };
    this.#maxWeight = Math.max(...Object.values(this.#options.weights));
    if (!deferred) { for (const _ of this.#steps()) { /* all at once */ } }
  }

  /**
   * Builds the index in slices of about `sliceMs` of work, yielding to the event loop between them: a
   * catalog of 20,000 tools, or a server's hostile one, never holds up a ping or another session's run.
   * Undefined when `abandoned()` said so between two slices.
   */
  static async build(
    docs: readonly ToolDoc[],
    options: Partial<ToolIndexOptions> = {},
    slices: { sliceMs?: number; abandoned?: () => boolean } = {},
  ): Promise<ToolIndex | undefined> {
    const sliceMs = slices.sliceMs ?? 8;
    const index = new ToolIndex(docs, options, true);
    let slice = performance.now();
    for (const _ of index.#steps()) {
      if (performance.now() - slice < sliceMs) continue;
      await new Promise((resolve) => setImmediate(resolve));
      // A build for docs that changed meanwhile is dropped: the newer build replaces it.
      if (slices.abandoned?.()) return undefined;
      slice = performance.now();
    }
    return index;
  }

  /** The work of building, as small steps: each `yield` is a point where the build may pause. */
  *#steps(): Generator<void> {
    const weights = this.#options.weights;
    for (let i = 0; i < this.#docs.length; i++) {
      const doc = this.#docs[i];
      const fields = searchFields(doc);
      const best = new Map<string, number>();
      const extra = new Map<string, number>();
      for (const field of SEARCH_FIELDS) {
        for (const word of new Set(fields[field])) {
          const w = weights[field];
          const previous = best.get(word) ?? 0;
          best.set(word, Math.max(previous, w));
          extra.set(word, (extra.get(word) ?? 0) + Math.min(previous, w));
        }
      }
      for (const [word, w] of best) {
        const weight = Math.min(this.#maxWeight, w + 0.1 * (extra.get(word) ?? 0));
        push(this.#postings, word, { doc: i, weight });
      }
      this.#nameWords.push(new Set(splitWords(doc.tool, { joined: false }).filter((w) => !STOPWORDS.has(w))));
      yield;
    }
    const n = this.#docs.length;
    let count = 0;
    for (const [word, list] of this.#postings) {
      this.#idf.set(word, Math.log(1 + (n - list.length + 0.5) / (list.length + 0.5)));
      if (++count % STEP === 0) yield;
    }
    this.#sorted = yield* sortedInSteps([...this.#postings.keys()]);
    const byLetter = new Map<string, string[]>();
    for (const word of this.#sorted) {
      push(this.#stems, stemOf(word), word);
      // Stopwords are never what a misspelt query word meant ("time" is not "the").
      if (!STOPWORDS.has(word)) push(byLetter, word[0], word);
      if (++count % STEP === 0) yield;
    }
    for (const [letter, words] of byLetter) {
      this.#byLetter.set(letter, words.length <= FUZZY_POOL ? words : this.#fuzzyPool(words));
      yield;
    }
  }

  /**
   * The words of one letter that typo correction looks through when there are too many: those that occur
   * in more than one tool first, so that a vocabulary of random words (a hostile server's) cannot make
   * every misspelt query slow. Kept in sorted order.
   */
  #fuzzyPool(words: string[]): string[] {
    const common = (word: string) => this.#postings.get(word)!.length > 1;
    let room = FUZZY_POOL - words.filter(common).length;
    return words.filter((word) => common(word) || room-- > 0).slice(0, FUZZY_POOL);
  }

  /** Number of tools in the index. */
  get size(): number {
    return this.#docs.length;
  }

  /** The tools that best match `query`, best first. */
  search(query: string, options: SearchOptions = {}): SearchHit[] {
    const limit = options.limit ?? 10;
    const terms = queryTerms(query);
    if (!terms.length || limit <= 0) return [];
    const nameCoverage = this.#options.nameCoverage;
    const totals = new Map<number, number>();
    const covered = new Map<number, Set<string>>();
    let possible = 0;
    for (const term of terms) {
      const perDoc = new Map<number, number>();
      const matches = this.#matches(term);
      // The term's rarity is that of its best match, so a typo or a plural is not worth more than the word.
      const idf = matches.reduce(
        (best, m) =>
          m.quality > best.quality ? { quality: m.quality, idf: this.#idf.get(m.word) ?? 0 } : best,
        { quality: 0, idf: 0 },
      ).idf;
      for (const { word, quality } of matches) {
        const value = quality * idf;
        for (const posting of this.#postings.get(word) ?? []) {
          if (options.server !== undefined && this.#docs[posting.doc].server !== options.server) continue;
          const score = value * posting.weight;
          if (score > (perDoc.get(posting.doc) ?? 0)) perDoc.set(posting.doc, score);
          if (nameCoverage && this.#nameWords[posting.doc].has(word) && quality >= 0.5) {
            const set = covered.get(posting.doc) ?? new Set();
            covered.set(posting.doc, set.add(word));
          }
        }
      }
      // A perfect hit has the word itself in a top-weighted field. A word that matches nothing anywhere
      // (idf 0) cannot tell tools apart, so it does not lower every score.
      possible += idf * this.#maxWeight;
      for (const [doc, score] of perDoc) totals.set(doc, (totals.get(doc) ?? 0) + score);
    }
    if (possible === 0) return [];
    const hits: { doc: number; score: number }[] = [];
    for (const [doc, total] of totals) {
      const names = this.#nameWords[doc];
      const coverage = names.size ? (covered.get(doc)?.size ?? 0) / names.size : 0;
      hits.push({ doc, score: (1 - nameCoverage) * (total / possible) + nameCoverage * coverage });
    }
    hits.sort((a, b) => b.score - a.score || a.doc - b.doc);
    return hits.slice(0, limit).map(({ doc, score }) => ({
      server: this.#docs[doc].server,
      tool: this.#docs[doc].tool,
      description: summaryText(this.#docs[doc].description),
      score: Math.round(Math.min(1, score) * 1000) / 1000,
      ...(this.#docs[doc].kind ? { kind: this.#docs[doc].kind } : {}),
      ...(this.#docs[doc].addedAt ? { addedAt: this.#docs[doc].addedAt } : {}),
    }));
  }

  #fuzzy(letter: string): Fuse<string> | undefined {
    const words = this.#byLetter.get(letter);
    if (!words) return undefined;
    let fuse = this.#fuse.get(letter);
    if (!fuse) {
      fuse = new Fuse(words, {
        threshold: this.#options.threshold,
        ignoreLocation: true,
        ignoreFieldNorm: true,
        includeScore: true,
        shouldSort: false,
      });
      this.#fuse.set(letter, fuse);
    }
    return fuse;
  }

  /**
   * Index words that match a query word, with a match quality in 0..1: the word itself, the same word
   * inflected ("entity" -> "entities"), words it begins ("dir" -> "directory"), and only when none of these
   * exist, typo corrections: swapped letters ("raed" -> "read"), else fuzzy matches ("ecoh" -> "echo").
   */
  #matches(term: string): { word: string; quality: number }[] {
    const cached = this.#cache.get(term);
    if (cached) return cached;
    const found = new Map<string, number>();
    if (this.#postings.has(term)) found.set(term, 1);
    for (const word of this.#stems.get(stemOf(term)) ?? []) if (!found.has(word)) found.set(word, 0.95);
    if (term.length >= 2) {
      for (let i = lowerBound(this.#sorted, term); i < this.#sorted.length; i++) {
        const word = this.#sorted[i];
        if (!word.startsWith(term)) break;
        if (!found.has(word)) found.set(word, 0.5 + 0.4 * (term.length / word.length));
      }
    }
    if (!found.size) {
      // Swapped neighbours ("raed", "lsit") are the commonest typo, and bitap counts them as two edits.
      for (let i = 0; i + 1 < term.length; i++) {
        const swapped = term.slice(0, i) + term[i + 1] + term[i] + term.slice(i + 2);
        if (swapped !== term && this.#postings.has(swapped)) found.set(swapped, 0.8);
      }
    }
    if (!found.size) {
      for (const letter of new Set(term.slice(0, 2))) {
        for (const { item: word, score = 1 } of this.#fuzzy(letter)?.search(term) ?? []) {
          // Edits allowed grow with length, as in Lucene's AUTO fuzziness: 1 up to 5 letters, then 2.
          if (Math.round(score * term.length) > (term.length <= 5 ? 1 : 2)) continue;
          const ratio = Math.min(term.length, word.length) / Math.max(term.length, word.length);
          const quality = (1 - score) * Math.sqrt(ratio) * 0.8;
          if (quality > 0.2 && quality > (found.get(word) ?? 0)) found.set(word, quality);
        }
      }
    }
    const out = [...found].map(([word, quality]) => ({ word, quality }));
    if (this.#cache.size >= this.#options.cacheSize) this.#cache.clear();
    if (this.#options.cacheSize > 0) this.#cache.set(term, out);
    return out;
  }
}

/** A crude English stem: enough to meet singulars and plurals ("entities", "entity") and -ing/-ed forms. */
export function stemOf(word: string): string {
  if (word.length <= 3) return word;
  if (word.endsWith("ies")) return word.slice(0, -3) + "y";
  if (/(ss|us|is)$/.test(word)) return word;
  if (/(xes|ches|shes|sses)$/.test(word)) return word.slice(0, -2);
  if (word.endsWith("s")) return word.slice(0, -1);
  if (word.endsWith("ing") && word.length > 5) return undouble(word.slice(0, -3));
  if (word.endsWith("ed") && word.length > 4) return undouble(word.slice(0, -2));
  return word;
}

function undouble(stem: string): string {
  return /([^aeiouls])\1$/.test(stem) ? stem.slice(0, -1) : stem;
}

/** `words` sorted (as `Array.prototype.sort` would), in steps: runs sorted one by one, then merged. */
function* sortedInSteps(words: string[]): Generator<void, string[]> {
  let runs: string[][] = [];
  for (let i = 0; i < words.length; i += STEP) {
    runs.push(words.slice(i, i + STEP).sort());
    yield;
  }
  while (runs.length > 1) {
    const merged: string[][] = [];
    for (let r = 0; r < runs.length; r += 2) {
      const [a, b = []] = [runs[r], runs[r + 1]];
      const out: string[] = new Array(a.length + b.length);
      let i = 0, j = 0, k = 0;
      while (i < a.length || j < b.length) {
        out[k++] = j >= b.length || (i < a.length && a[i] < b[j]) ? a[i++] : b[j++];
        if (k % STEP === 0) yield;
      }
      merged.push(out);
    }
    runs = merged;
  }
  return runs[0] ?? [];
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function lowerBound(sorted: string[], key: string): number {
  let lo = 0, hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The words of a query that are worth matching: split like tool names, without stopwords or one-letter bits. */
export function queryTerms(query: string): string[] {
  const words = [...new Set(splitWords(query))];
  const useful = words.filter((w) => w.length > 1 && !STOPWORDS.has(w));
  return useful.length ? useful : words;
}
