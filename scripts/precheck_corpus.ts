/**
 * Rebuilds tests/testdata/precheck/valid/repo_programs.json: the Python programs the repository's own
 * tests run (string and template literals passed to `run(`, `runWithin(s,`, `.execute(` or `code:`) and
 * the python blocks
 * of README and docs/, for the pre-run check's zero-false-positive test. Programs that call servers the
 * corpus does not have (tests/unit/_precheck_host.ts), that do not parse, and the few that make a call
 * its server's schema refuses on purpose (EXCLUDED, with why) are left out.
 *
 *   deno run -A scripts/precheck_corpus.ts
 * @module
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { CORPUS_TOOLS } from "../tests/unit/_precheck_host.ts";
import { pythonAlias } from "../core/python_alias.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const OUT = join(ROOT, "tests/testdata/precheck/valid/repo_programs.json");

/** Test files whose programs are wrong on purpose: the pre-run check's own planted errors. */
const PLANTED_FILES = new Set(["tests/unit/precheck_test.ts", "tests/unit/check_calls_test.ts"]);

/** Programs that call a tool with arguments its schema refuses, on purpose (their hosts are fakes). */
const EXCLUDED: Record<string, string> = {
  "await mcp_my_server.echo()\nwhile True: pass": "a pause test: its fake echo takes no arguments",
  "await mcp_my_server.echo()": "a pause test: its fake echo takes no arguments",
  "await mcp_my_server.read_file(path='/y')": "a test of an unknown tool's error",
};

/** Parses the TypeScript string literal at text[i]; `${...}` becomes a placeholder. */
function tsString(text: string, i: number): string | undefined {
  const quote = text[i];
  const escapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", "0": "\0" };
  let out = "";
  for (let j = i + 1; j < text.length; j++) {
    const c = text[j];
    if (c === "\\") {
      const next = text[++j];
      out += escapes[next] ?? next;
    } else if (c === quote) {
      return /^\s*\+/.test(text.slice(j + 1, j + 4)) ? undefined : out;
    } else if (quote === "`" && text.startsWith("${", j)) {
      let depth = 1;
      let k = j + 2;
      for (; depth && k < text.length; k++) depth += text[k] === "{" ? 1 : text[k] === "}" ? -1 : 0;
      const expression = text.slice(j + 2, k - 1);
      out += /^(py\(|JSON\.stringify)/.test(expression) ? '"placeholder"' : "0";
      j = k - 1;
    } else if (quote !== "`" && c === "\n") {
      return undefined;
    } else {
      out += c;
    }
  }
  return undefined;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

const found: { from: string; code: string }[] = [];
for (const path of files(join(ROOT, "tests")).filter((p) => p.endsWith(".ts")).sort()) {
  if (PLANTED_FILES.has(path.slice(ROOT.length))) continue;
  const text = readFileSync(path, "utf8");
  for (const match of text.matchAll(/(\brun\(|\.execute\(|\bcode:|runWithin\(\s*\w+,)\s*/g)) {
    const at = match.index! + match[0].length;
    if (!"`\"'".includes(text[at])) continue;
    const code = tsString(text, at);
    if (code !== undefined) found.push({ from: path.slice(ROOT.length), code });
  }
}
for (const path of ["README.md", ...readdirSync(join(ROOT, "docs")).map((f) => `docs/${f}`)].sort()) {
  if (!path.endsWith(".md")) continue;
  for (const block of readFileSync(join(ROOT, path), "utf8").matchAll(/```python\n([\s\S]*?)```/g)) {
    found.push({ from: path, code: block[1] });
  }
}

const known = new Set(Object.keys(CORPUS_TOOLS).flatMap((name) => [name, pythonAlias(name)]));
const servers = (code: string) => [
  ...[...code.matchAll(/\bmcp_([A-Za-z0-9_]+)\s*\./g)].map((m) => m[1]).filter((s) => s !== "servers"),
  ...[...code.matchAll(/mcp_servers\[\s*["']([^"']+)["']\s*\]/g)].map((m) => m[1]),
  ...[...code.matchAll(/call_tool\(\s*["']([^"']+)["']/g)].map((m) => m[1]),
  ...[...code.matchAll(/from mcp\.servers\.([A-Za-z0-9_]+)/g)].map((m) => m[1]),
];
const seen = new Set<string>();
const candidates = found.filter(({ code }) => {
  if (seen.has(code) || code in EXCLUDED) return false;
  seen.add(code);
  return servers(code).every((s) => known.has(s));
});
// Only programs that parse: a syntax error is the check's too, but not what this corpus is about.
const parse = spawnSync("python3", [
  "-c",
  "import ast, json, sys\nout = []\nfor code in json.load(sys.stdin):\n" +
  "    try:\n        ast.parse(code)\n        out.append(True)\n    except (SyntaxError, ValueError):\n" +
  "        out.append(False)\nprint(json.dumps(out))",
], { input: JSON.stringify(candidates.map((c) => c.code)), encoding: "utf8" });
const parses = JSON.parse(parse.stdout) as boolean[];
const corpus = candidates.filter((_, i) => parses[i]);
writeFileSync(OUT, JSON.stringify(corpus, null, 1) + "\n");
console.log(`${corpus.length} programs (of ${found.length} found) written to ${OUT.slice(ROOT.length)}`);
