/**
 * The files the Pyodide subprocess may read, and nothing else: the Pyodide distribution, and a cache
 * directory `<stateDir>/pyodide/<version>/` holding the host program and a start-up memory snapshot
 * (and, for a compiled binary, the distribution itself, unpacked there on first use: see _embedded.ts).
 * @module
 */
import { createHash } from "node:crypto";
import { copyFile, mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { pyodideHostMain, pyodideWorkerMain } from "./pyodide_host.ts";
import { sparseSnapshotCodec } from "./_pyodide_sparse.ts";
import { PYODIDE_GLUE } from "./_pyodide_glue.ts";
import { prebuiltSnapshots, PYODIDE_FILES } from "./_pyodide_embedded.ts";

export { PYODIDE_FILES } from "./_pyodide_embedded.ts";

/** Progress of first-use preparation (copying the distribution, making the snapshot). */
export interface PrepareProgress {
  phase: "copy" | "snapshot";
  /** Steps done so far, of `total`. */
  done: number;
  total: number;
  message: string;
}

/** A callback for {@link PrepareProgress} events. */
export type ProgressCallback = (event: PrepareProgress) => void;

/** The directory of the npm package `pyodide` above `roots` (node_modules lookup), if any. */
export function findPyodideAssets(roots: string[]): string | undefined {
  for (const root of roots) {
    for (let dir = resolve(root);; dir = dirname(dir)) {
      const candidate = join(dir, "node_modules", "pyodide");
      if (isDistribution(candidate)) return candidate;
      if (dirname(dir) === dir) break;
    }
  }
  return undefined;
}

/** True when directory `source` has every file in {@link PYODIDE_FILES}. */
export function isDistribution(source: string): boolean {
  return PYODIDE_FILES.every((file) => existsSync(join(source, file)));
}

/** The version in a Pyodide distribution's package.json. */
export function pyodideVersion(source: string): string {
  const version = JSON.parse(readFileSync(join(source, "package.json"), "utf8")).version;
  if (typeof version !== "string" || !/^[\w.+-]+$/.test(version)) {
    throw new Error(`The Pyodide package in "${source}" has no usable version: reinstall it`);
  }
  return version;
}

/** `<stateDir>/pyodide/<version>/`: the cache the subprocess may read. */
export function cacheDir(stateDir: string, version: string): string {
  return join(resolve(stateDir), "pyodide", version);
}

/**
 * Copies the Pyodide distribution from directory `source` into `<stateDir>/pyodide/<version>/` unless it
 * is there already, and returns that directory (for embedding codemode where only a copy may be read).
 */
export async function installPyodideAssets(
  source: string,
  stateDir: string,
  onProgress?: ProgressCallback,
): Promise<string> {
  if (!isDistribution(source)) {
    throw new Error(
      `"${source}" is not a Pyodide distribution (it lacks one of ${PYODIDE_FILES.join(", ")})`,
    );
  }
  const target = cacheDir(stateDir, pyodideVersion(source));
  let done = 0;
  for (const file of PYODIDE_FILES) {
    const to = join(target, file);
    const have = await stat(to).catch(() => undefined);
    if (!have || have.size !== (await stat(join(source, file))).size) {
      onProgress?.({ phase: "copy", done, total: PYODIDE_FILES.length, message: `Copying ${file}` });
      await copyAtomically(join(source, file), to);
    }
    done++;
  }
  onProgress?.({ phase: "copy", done, total: PYODIDE_FILES.length, message: "Pyodide files ready" });
  return target;
}

/** Progress for a terminal: the current step on one stderr line, ended with its phase (silent if no step). */
export function stderrProgress(): ProgressCallback {
  let shown = false;
  return (event) => {
    const last = event.done === event.total;
    if (last && !shown) return; // a phase with nothing to do (the files are there already) says nothing
    shown = !last;
    const step = last ? "\n" : ` (${event.done + 1}/${event.total})`;
    process.stderr.write(`\r\x1b[Kcodemode: ${event.message}${step}`);
  };
}

/** The host program as one self-contained ES module. */
export function hostProgram(): string {
  return [
    "// codemode: Pyodide sandbox host, generated from plugins/runtime/pyodide_host.ts",
    `const glue = ${JSON.stringify(PYODIDE_GLUE)};`,
    `const workerMain = ${pyodideWorkerMain.toString()};`,
    `const sparseCodec = ${sparseSnapshotCodec.toString()};`,
    `await (${pyodideHostMain.toString()})(workerMain, glue, sparseCodec);`,
    "",
  ].join("\n");
}

/** Writes the host program into `dir` (named by its hash, so versions never clash) and returns its path. */
export async function writeHostProgram(dir: string): Promise<string> {
  const source = hostProgram();
  const path = join(dir, `host-${hash(source)}.mjs`);
  if (!existsSync(path)) await writeAtomically(path, source);
  return path;
}

/**
 * Where the snapshot for this host program, Pyodide version and preloaded runtime (`preload`: its
 * source, as preloadKey gives it) lives.
 */
export function snapshotPath(dir: string, program: string, version: string, preload = ""): string {
  return join(dir, `snapshot-${hash(`${version}\n${readFileSync(program, "utf8")}\n${preload}`)}.bin`);
}

/** Writes `data` through a temporary file and a rename, so readers never see half a file. */
export async function writeAtomically(path: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}.${randomTag()}.tmp`;
  try {
    await writeFile(temp, data);
    await rename(temp, path);
  } finally {
    await rm(temp, { force: true });
  }
}

/** Copies `from` to `to` through a temporary file and a rename. */
export async function copyAtomically(from: string, to: string): Promise<void> {
  await mkdir(dirname(to), { recursive: true });
  const temp = `${to}.${process.pid}.${randomTag()}.tmp`;
  try {
    await copyFile(from, temp);
    await rename(temp, to);
  } finally {
    await rm(temp, { force: true });
  }
}

/**
 * Where the start-up snapshot made ahead of time is: the npm package's registered folder, else
 * `dist/pyodide/<version>/` of the checkout this module is in, made after `npm install` by
 * scripts/setup.sh or `./codemode` (scripts/pyodide_snapshot.ts). Only this module's own checkout counts, never one found from the working
 * directory.
 */
export function prebuiltDir(version: string): string | undefined {
  const carried = prebuiltSnapshots();
  if (carried) return join(carried, version);
  try {
    if (import.meta.url.startsWith("file:")) {
      return join(fileURLToPath(new URL("../../dist/pyodide/", import.meta.url)), version);
    }
  } catch { /* a compiled binary's module URL is not a file */ }
  return undefined;
}

/** Directories to search for node_modules: beside this module (a checkout) and the working directory. */
export function searchRoots(): string[] {
  const roots = [process.cwd()];
  try {
    if (import.meta.url.startsWith("file:")) roots.unshift(dirname(fileURLToPath(import.meta.url)));
  } catch { /* a compiled binary's module URL is not a file */ }
  return roots;
}

function hash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}

function randomTag(): string {
  return Math.random().toString(36).slice(2, 10);
}
