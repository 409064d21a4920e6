/**
 * The layout's rules, checked on the source: no import cycles in product code (type-only and dynamic
 * imports count), core/ imports no plugin and nothing from cli/, mod.ts reaches nothing in cli/, and each
 * core/ subsystem imports only the subsystems its README allows (its "May import:" line) and names every
 * file in it, and start-up loads no command handler before the command runs.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

const ROOT = normalize(join(dirname(new URL(import.meta.url).pathname), "../.."));
const PRODUCT = ["mod.ts", "cli.ts", "cli", "core", "plugins", "sandbox"];
const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^"';]*?from\s*["'](\.{1,2}\/[^"']+)["']|import\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)|^import\s+["'](\.{1,2}\/[^"']+)["']/gm;

/** Every product .ts file, relative to the repository root. */
function productFiles(): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    if (statSync(join(ROOT, path)).isDirectory()) {
      for (const entry of readdirSync(join(ROOT, path))) walk(join(path, entry));
    } else if (path.endsWith(".ts")) out.push(path);
  };
  for (const p of PRODUCT) walk(p);
  return out.sort();
}

/** The relative .ts imports of each file, as repository paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of productFiles()) {
    // Comments may show imports in examples; they are not edges.
    const source = readFileSync(join(ROOT, file), "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(
      /^\s*\/\/.*$/gm,
      "",
    );
    const targets = [...source.matchAll(IMPORT)]
      .map((m) => m[1] ?? m[2] ?? m[3])
      .filter((spec) => spec.endsWith(".ts"))
      .map((spec) => normalize(join(dirname(file), spec)));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Every file reachable from `start`. */
function reachable(graph: Map<string, string[]>, start: string): Set<string> {
  const seen = new Set<string>();
  const stack = [start];
  while (stack.length) {
    const file = stack.pop()!;
    for (const next of graph.get(file) ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        stack.push(next);
      }
    }
  }
  return seen;
}

/** Import cycles, each as the files in it (Tarjan's strongly connected components of two or more files). */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    indices.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

Deno.test("product code has no import cycles, type-only and dynamic imports included", () => {
  assert.deepEqual(cycles(importGraph()), []);
});

Deno.test("core/ imports no plugin and nothing from cli/", () => {
  const graph = importGraph();
  const bad = [...graph].flatMap(([file, targets]) =>
    file.startsWith("core/")
      ? targets.filter((t) => t.startsWith("plugins/") || t.startsWith("cli/")).map((t) => `${file} -> ${t}`)
      : []
  );
  assert.deepEqual(bad, []);
});

Deno.test("mod.ts reaches nothing in cli/, directly or through what it imports", () => {
  const cli = [...reachable(importGraph(), "mod.ts")].filter((f) => f.startsWith("cli"));
  assert.deepEqual(cli, []);
});

Deno.test("every import resolves to a file that exists", () => {
  const missing = [...importGraph()].flatMap(([file, targets]) =>
    targets.filter((t) => !safeExists(join(ROOT, t))).map((t) => `${file} -> ${t}`)
  );
  assert.deepEqual(missing, []);
});

/** core/'s subsystem folders and what each README's "May import:" line allows. */
function allowedImports(): Map<string, Set<string>> {
  const rules = new Map<string, Set<string>>();
  for (const folder of readdirSync(join(ROOT, "core"))) {
    if (!statSync(join(ROOT, "core", folder)).isDirectory()) continue;
    const readme = readFileSync(join(ROOT, "core", folder, "README.md"), "utf8");
    const line = /^May import: (.*)$/m.exec(readme)?.[1] ?? "";
    const allowed = line.replace(/\.$/, "").split(",").map((s) => s.trim())
      .map((s) => s === "the shared files at core/'s top" ? "." : s).filter((s) => s && s !== "nothing");
    rules.set(folder, new Set(allowed));
  }
  return rules;
}

Deno.test("each core/ subsystem imports only what its README allows", () => {
  const rules = allowedImports();
  assert.ok(rules.size >= 6, "core/ has its subsystem folders");
  const folderOf = (file: string) => {
    const parts = file.split("/");
    return parts[0] !== "core" ? undefined : parts.length > 2 ? parts[1] : ".";
  };
  const bad: string[] = [];
  for (const [file, targets] of importGraph()) {
    const from = folderOf(file);
    if (!from || from === ".") continue;
    for (const target of targets) {
      const to = folderOf(target);
      if (to && to !== from && !rules.get(from)!.has(to)) bad.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(bad, []);
});

Deno.test("core/ keeps at most six files at its top", () => {
  const top = readdirSync(join(ROOT, "core")).filter((f) => f.endsWith(".ts"));
  assert.ok(top.length <= 6, `core/ has ${top.length} files at its top: ${top.join(", ")}`);
});

function safeExists(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

Deno.test("each core/ folder's README names every file in the folder", () => {
  const unnamed: string[] = [];
  for (const folder of readdirSync(join(ROOT, "core"))) {
    const dir = join(ROOT, "core", folder);
    if (!statSync(dir).isDirectory()) continue;
    const readme = readFileSync(join(dir, "README.md"), "utf8");
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      if (!readme.includes(`\`${file}\``)) unnamed.push(`core/${folder}/${file}`);
    }
  }
  assert.deepEqual(unnamed, [], "files their folder's README does not name");
});

/** The files `file` imports statically (dynamic imports load on demand, so they are left out). */
function staticImports(file: string): string[] {
  const source = readFileSync(join(ROOT, file), "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  return [
    ...source.matchAll(/^(?:import|export)\s[^"';]*?from\s*["']([^"']+)["']|^import\s+["']([^"']+)["']/gm),
  ]
    .map((m) => m[1] ?? m[2])
    .map((spec) => spec.startsWith(".") ? normalize(join(dirname(file), spec)) : spec);
}

Deno.test("start-up loads only what a command needs: --version and --help before any library", () => {
  // cli/main.ts answers --version and --help itself; everything else is behind a dynamic import.
  assert.deepEqual(staticImports("cli/main.ts"), ["core/version.ts"]);
  // The program loads each command's handler when that command runs, never at parse time.
  const handlers = ["run", "serve", "serve_http", "doctor", "search", "servers", "tools", "stats", "skills"]
    .map((name) => `cli/${name}.ts`).concat("cli/auth.ts", "cli/ui.ts", "mod.ts", "core/app.ts");
  const eager = staticImports("cli/program.ts").filter((file) => handlers.includes(file));
  assert.deepEqual(eager, [], "command handlers cli/program.ts imports statically");
});

Deno.test("OpenTelemetry loads only when tracing starts: otel.ts and the export worker import it, otel.ts only on demand", () => {
  // `import type` is erased: what loads a library is a value import.
  const valueImports = (file: string) =>
    staticImports(file).filter((spec) =>
      !new RegExp(`^import type [^;]*?from\\s*["'][^"']*${spec.split("/").pop()}["']`, "m")
        .test(readFileSync(join(ROOT, file), "utf8"))
    );
  const otel = productFiles().filter((file) =>
    valueImports(file).some((spec) => spec.startsWith("@opentelemetry/"))
  );
  // The worker entry is started by its URL (core/observe/span_export.ts), never imported.
  assert.deepEqual(
    otel,
    ["core/observe/otel.ts", "core/observe/span_export_worker.ts"],
    "files that import OpenTelemetry statically",
  );
  const importers = [...importGraph()].filter(([, targets]) => targets.includes("core/observe/otel.ts"));
  const statically = importers.map(([file]) => file).filter((file) =>
    staticImports(file).includes("core/observe/otel.ts")
  );
  assert.deepEqual(statically, [], "files that import otel.ts statically");
  assert.ok(importers.length > 0, "something imports otel.ts on demand");
  const exportImporters = productFiles().filter((file) =>
    valueImports(file).includes("core/observe/span_export.ts")
  );
  assert.deepEqual(exportImporters, ["core/observe/otel.ts"], "files that import span_export.ts");
  const workerImporters = productFiles().filter((file) =>
    valueImports(file).includes("core/observe/span_export_worker.ts")
  );
  assert.deepEqual(workerImporters, [], "files that import the export worker's module");
});
