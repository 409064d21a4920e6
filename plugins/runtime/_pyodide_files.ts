/**
 * The files the Pyodide subprocess may read, and nothing else: the Pyodide distribution, and a cache
 * directory `<stateDir>/pyodide/<version>/` holding the host program and a start-up memory snapshot
 * (and, for a compiled binary, the distribution itself, copied there on first use).
 * @module
 */
import { createHash } from "node:crypto";
import { copyFile, mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { pyodideHostMain, pyodideWorkerMain } from "./pyodide_host.ts";
import { PYODIDE_GLUE } from "./_pyodide_glue.ts";

/** The files of the Pyodide npm package the sandbox loads. */
export const PYODIDE_FILES: readonly string[] = [
  "package.json",
  "pyodide.mjs",
  "pyodide.asm.mjs",
  "pyodide.asm.wasm",
  "python_stdlib.zip",
  "pyodide-lock.json",
];

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

/** True when `dir` holds every file in {@link PYODIDE_FILES}. */
export function isDistribution(dir: string): boolean {
  return PYODIDE_FILES.every((file) => existsSync(join(dir, file)));
}

/** The version in a Pyodide distribution's package.json. */
export function pyodideVersion(dir: string): string {
  const version = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
  if (typeof version !== "string" || !/^[\w.+-]+$/.test(version)) {
    throw new Error(`The Pyodide package in "${dir}" has no usable version: reinstall it`);
  }
  return version;
}

/** `<stateDir>/pyodide/<version>/`: the cache the subprocess may read. */
export function cacheDir(stateDir: string, version: string): string {
  return join(resolve(stateDir), "pyodide", version);
}

/**
 * Copies the Pyodide distribution from `source` into `<stateDir>/pyodide/<version>/` unless it is there
 * already, and returns that directory. For a compiled binary, which has no node_modules to read from.
 */
export async function installPyodideAssets(
  source: string,
  stateDir: string,
  onProgress?: ProgressCallback,
): Promise<string> {
  if (!isDistribution(source)) {
    throw new Error(`"${source}" is not a Pyodide distribution (it lacks ${PYODIDE_FILES.join(", ")})`);
  }
  const target = cacheDir(stateDir, pyodideVersion(source));
  await mkdir(target, { recursive: true });
  let done = 0;
  for (const file of PYODIDE_FILES) {
    const from = join(source, file), to = join(target, file);
    const have = await stat(to).catch(() => undefined);
    if (!have || have.size !== (await stat(from)).size) {
      onProgress?.({ phase: "copy", done, total: PYODIDE_FILES.length, message: `Copying ${file}` });
      const temp = `${to}.${process.pid}.${randomTag()}.tmp`;
      await copyFile(from, temp);
      await rename(temp, to);
    }
    done++;
  }
  onProgress?.({ phase: "copy", done, total: PYODIDE_FILES.length, message: "Pyodide files ready" });
  return target;
}

/** The host program as one self-contained ES module. */
export function hostProgram(): string {
  return [
    "// codemode: Pyodide sandbox host, generated from plugins/runtime/pyodide_host.ts",
    `const glue = ${JSON.stringify(PYODIDE_GLUE)};`,
    `const workerMain = ${pyodideWorkerMain.toString()};`,
    `await (${pyodideHostMain.toString()})(workerMain, glue);`,
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

/** Where the snapshot for this host program and Pyodide version lives. */
export function snapshotPath(dir: string, program: string, version: string): string {
  return join(dir, `snapshot-${hash(`${version}\n${readFileSync(program, "utf8")}`)}.bin`);
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
