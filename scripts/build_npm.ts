/**
 * Builds what the npm package runs, in dist/npm/ (`npm pack` and `npm publish` run this as `prepack`):
 *
 * 1. `codemode.js` and its chunks: scripts/npm_entry.ts bundled by Bun for a Node-compatible runtime
 *    (Deno runs it: Deno will not strip types from TypeScript under node_modules), with the
 *    workers as entries of their own, `result_validation_worker.js` and `span_export_worker.js`. Text
 *    and JSON imports (the sandbox's Python, the seccomp profile, the dashboard's files) are inlined; npm packages stay
 *    imports, resolved from the install's node_modules, so a dependency added to package.json ships
 *    with no edit here (but for INLINED ones, bundled in). Every package the bundle imports must be a `dependency` (not a devDependency):
 *    the build fails otherwise. The chunks sit two folders down, like the sources they come from, so a
 *    module's `new URL("../../sandbox/image/...", import.meta.url)` finds the same file in the package
 *    (package.json's `files` ships them; the build checks each one is listed).
 * 2. `pyodide/<version>/snapshot-<hash>.bin`: the Pyodide start-up snapshot, made by running the bundle
 *    itself once (`codemode run` on the pyodide runtime in a throwaway HOME), since a snapshot belongs to
 *    the exact host program text, which differs between the bundle and the sources.
 *
 *   deno run -A scripts/build_npm.ts [--no-snapshot]
 * @module
 */
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import process from "node:process";

const ROOT = resolve(new URL("..", import.meta.url).pathname);
/** Where the package's runnable code goes (package.json's `files` lists it). */
export const NPM_DIR = join(ROOT, "dist", "npm");
const BIN = join(ROOT, "node_modules", ".bin");

interface PackageJson {
  version: string;
  files: string[];
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface Metafile {
  outputs: Record<string, { imports?: { path: string; kind: string; external?: boolean }[] }>;
}

function readPackage(): PackageJson {
  return JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
}

/** The npm package a bare import specifier names ("@scope/name/sub" -> "@scope/name"), or undefined. */
export function packageOf(specifier: string): string | undefined {
  if (/^(node:|\.|\/|[a-z]+:\/\/)/.test(specifier)) return undefined;
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/**
 * What is wrong with the bundle's imports: packages it imports that are not `dependencies`, and files it
 * finds relative to its own URL that package.json's `files` does not ship.
 */
export function bundleProblems(
  pkg: PackageJson,
  imported: string[],
  relativeFiles: string[],
): string[] {
  const problems: string[] = [];
  for (const name of [...new Set(imported)].sort()) {
    if (pkg.dependencies[name]) continue;
    problems.push(
      pkg.devDependencies?.[name]
        ? `the bundle imports "${name}", a devDependency: move it to dependencies`
        : `the bundle imports "${name}", which package.json does not depend on`,
    );
  }
  for (const file of relativeFiles) {
    if (!pkg.files.some((entry) => file === entry || file.startsWith(entry.replace(/\/?$/, "/")))) {
      problems.push(`the bundle reads "${file}", which package.json's "files" does not ship`);
    }
  }
  return problems;
}

/**
 * Packages bundled into the chunks instead of imported from node_modules: OpenTelemetry's declare engines
 * node >= 22.15, so as dependencies `npm i -g codemode` on Node 20 warns EBADENGINE for each, though Deno,
 * which runs the bundle, runs them. Inlined, they are devDependencies and the install fetches nothing of
 * theirs; they load only when tracing is on (core/observe/otel.ts imports them dynamically: a chunk).
 */
export const INLINED = ["@opentelemetry/"];

/** Every package the bundle leaves as an import: what package.json names, but for the INLINED. */
export function externalPackages(pkg: PackageJson): string[] {
  return [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies ?? {})]
    .filter((name) => !INLINED.some((prefix) => name.startsWith(prefix)));
}

/** Bundles scripts/npm_entry.ts into dist/npm/ and checks its imports; throws with every problem found. */
export function bundle(): void {
  rmSync(NPM_DIR, { recursive: true, force: true });
  const metafile = join(ROOT, "dist", "npm-meta.json");
  const built = spawnSync(join(BIN, "bun"), [
    "build",
    "scripts/npm_entry.ts",
    // The workers are started by their URLs (core/upstream/result_validation.ts,
    // core/observe/span_export.ts): entries of their own, beside the chunks.
    "core/upstream/result_validation_worker.ts",
    "core/observe/span_export_worker.ts",
    "--target=node",
    "--format=esm",
    // Each dynamically imported module in a chunk of its own, loaded when first imported: `--version`
    // does not pay for every library.
    "--splitting",
    // npm packages stay imports (below), but for INLINED ones.
    ...externalPackages(readPackage()).flatMap((name) => ["--external", name, "--external", `${name}/*`]),
    // Names stay readable in stack traces.
    "--minify-syntax",
    "--minify-whitespace",
    "--entry-naming=[name].[ext]",
    `--metafile=${metafile}`,
    "--outdir",
    NPM_DIR,
  ], { cwd: ROOT, encoding: "utf8" });
  if (built.status !== 0) throw new Error(`bun build failed:\n${built.stderr}${built.stdout}`);
  // The entry is named for the command (no chunk imports an entry, so a rename breaks nothing).
  renameSync(join(NPM_DIR, "npm_entry.js"), join(NPM_DIR, "codemode.js"));
  const meta = JSON.parse(readFileSync(metafile, "utf8")) as Metafile;
  rmSync(metafile, { force: true });
  const imported = Object.values(meta.outputs).flatMap((output) =>
    (output.imports ?? []).map((i) => packageOf(i.path)).filter((name): name is string => Boolean(name))
  );
  const relativeFiles = readdirSync(NPM_DIR).filter((name) => name.endsWith(".js")).flatMap((name) =>
    [
      ...readFileSync(join(NPM_DIR, name), "utf8").matchAll(
        /new URL\("(\.\.\/\.\.\/[^"]+)",\s*import\.meta\.url\)/g,
      ),
    ]
      .map((match) => relative(ROOT, resolve(NPM_DIR, match[1])))
      // dist/pyodide/ is the checkout's snapshot folder; the package registers its own (npm_entry.ts).
      .filter((file) => !file.startsWith("dist/"))
  );
  // Modules a chunk starts from beside itself (`new URL("./x.js", import.meta.url)`) must have been built
  // (a source's "./x.ts" is the path used when running from the checkout).
  const besideFiles = readdirSync(NPM_DIR).filter((name) => name.endsWith(".js")).flatMap((name) =>
    [
      ...readFileSync(join(NPM_DIR, name), "utf8").matchAll(
        /new URL\("\.\/([^"/]+\.js)",\s*import\.meta\.url\)/g,
      ),
    ]
      .map((match) => match[1])
  );
  const problems = [
    ...bundleProblems(readPackage(), imported, relativeFiles),
    ...[...new Set(besideFiles)].filter((file) => !existsSync(join(NPM_DIR, file))).map((file) =>
      `the bundle starts "./${file}" beside its chunks, which the build did not make`
    ),
  ];
  if (problems.length) throw new Error(`the npm bundle is not shippable:\n  ${problems.join("\n  ")}`);
}

/**
 * Makes the start-up snapshot by running the bundle once, and keeps it in dist/npm/pyodide/<version>/.
 * Returns its path.
 */
export function snapshot(): string {
  const scratch = mkdtempSync(join(tmpdir(), "codemode-npm-snapshot-"));
  try {
    const state = join(scratch, "state");
    const home = join(scratch, "home");
    mkdirSync(home);
    // The flags bin/codemode.js runs the bundle with.
    const flags = ["run", "-A", "--quiet", "--no-config", "--no-lock", "--node-modules-dir=manual"];
    const ran = spawnSync(join(BIN, "deno"), [...flags, join(NPM_DIR, "codemode.js"), "run", "-"], {
      cwd: scratch,
      input: "print('snapshot')\n",
      encoding: "utf8",
      timeout: 600_000,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: home,
        CODEMODE_STATE_DIR: state,
        CODEMODE_RUNTIME: "pyodide",
        DENO_NO_UPDATE_CHECK: "1",
      },
    });
    if (ran.status !== 0 || ran.stdout.trim() !== "snapshot") {
      throw new Error(`running the bundle to make the snapshot failed (${ran.status}):\n${ran.stderr}`);
    }
    const versions = readdirSync(join(state, "pyodide"));
    if (versions.length !== 1) throw new Error(`expected one Pyodide version in ${state}, found ${versions}`);
    const made = readdirSync(join(state, "pyodide", versions[0])).filter((f) => /^snapshot-.*\.bin$/.test(f));
    if (made.length !== 1) throw new Error(`expected one snapshot, found ${made.join(", ") || "none"}`);
    const to = join(NPM_DIR, "pyodide", versions[0]);
    mkdirSync(to, { recursive: true });
    copyFileSync(join(state, "pyodide", versions[0], made[0]), join(to, made[0]));
    return join(to, made[0]);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  try {
    const started = performance.now();
    bundle();
    const bundled = performance.now();
    const made = process.argv.includes("--no-snapshot") ? undefined : snapshot();
    const seconds = (ms: number) => (ms / 1000).toFixed(1);
    console.error(
      `build_npm: bundled dist/npm/ in ${seconds(bundled - started)} s` +
        (made ? `; made ${relative(ROOT, made)} in ${seconds(performance.now() - bundled)} s` : ""),
    );
    if (!existsSync(join(NPM_DIR, "codemode.js"))) throw new Error("dist/npm/codemode.js is missing");
  } catch (error) {
    console.error(`build_npm: ${(error as Error).message}`);
    process.exit(1);
  }
}
