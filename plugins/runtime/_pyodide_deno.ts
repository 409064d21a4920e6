/**
 * The locked-down Deno subprocess that hosts Pyodide: finding a deno executable, and the exact command line
 * and environment it runs with. Deno's permission system is the sandbox here, so every flag matters and
 * `denoArgs` is a pure function that tests check flag by flag.
 * @module
 */
import { basename, delimiter, dirname, join } from "node:path";
import process from "node:process";
import type { HostConfig } from "./pyodide_host.ts";
import { isExecutable } from "./_executable.ts";

/** Everything that decides the subprocess's command line. */
export interface DenoArgsInput {
  deno: string;
  /** The host program (pyodide_host.ts, written out as one .mjs file). */
  program: string;
  /** The only paths the subprocess may read: the Pyodide files and the cache holding the program. */
  readable: string[];
  /** Cap for each V8 heap (main thread and worker), in bytes. */
  heapBytes: number;
  config: HostConfig;
}

/** The `deno run` command line: read access to `readable`, nothing else, no way to fetch code. */
export function denoArgs(input: DenoArgsInput): string[] {
  for (const path of input.readable) {
    if (path.includes(",")) {
      throw new Error(
        `The Pyodide path "${path}" contains a comma, which Deno's --allow-read can't take: move it`,
      );
    }
  }
  const heapMiB = Math.max(64, Math.ceil(input.heapBytes / 2 ** 20));
  return [
    input.deno,
    "run",
    "--no-prompt",
    "--no-config",
    "--no-lock",
    "--no-remote",
    "--no-npm",
    "--cached-only",
    "--no-code-cache",
    `--allow-read=${input.readable.join(",")}`,
    "--deny-write",
    "--deny-net",
    "--deny-env",
    "--deny-run",
    "--deny-ffi",
    "--deny-sys",
    "--deny-import",
    // No eval or Function constructor: the usual first step from a JS object in Python to running JS.
    `--v8-flags=--max-old-space-size=${heapMiB},--disallow-code-generation-from-strings`,
    input.program,
    JSON.stringify(input.config),
  ];
}

/** The subprocess's whole environment: nothing of the host's, and a DENO_DIR nothing can be written to. */
export function denoEnv(program: string, platform: string = process.platform): Record<string, string> {
  // A path under a regular file can never become a directory, not even for root: Deno keeps its caches in
  // memory, and localStorage and the Cache API (which need no permission) fail instead of writing to disk.
  const env: Record<string, string> = {
    DENO_DIR: join(program, "deno-dir"),
    NO_COLOR: "1",
    DENO_NO_UPDATE_CHECK: "1",
    DENO_NO_PROMPT: "1",
  };
  if (platform === "win32") env.SYSTEMROOT = process.env.SYSTEMROOT ?? "C:\\Windows";
  return env;
}

/** The deno running this process, if any (not a `deno compile` binary, which can't run other code). */
export function runningDeno(): string | undefined {
  try {
    const path = (globalThis as { Deno?: { execPath?: () => string } }).Deno?.execPath?.();
    return path && /^deno(\.exe)?$/i.test(basename(path)) ? path : undefined;
  } catch {
    return undefined;
  }
}

/** Where findDeno looks besides `roots`: the running deno and the PATH. */
export interface DenoSearch {
  running?: string;
  path: string;
}

/** Finds deno: `explicit`, else the running deno, else PATH, else a node_modules/.bin above `roots`. */
export function findDeno(
  explicit: string | undefined,
  roots: string[],
  search: DenoSearch = { running: runningDeno(), path: process.env.PATH ?? "" },
): string | undefined {
  if (explicit) return explicit;
  if (search.running) return search.running;
  const names = process.platform === "win32" ? ["deno.exe", "deno.cmd"] : ["deno"];
  for (const dir of search.path.split(delimiter).filter(Boolean)) {
    for (const name of names) {
      if (isExecutable(join(dir, name))) return join(dir, name);
    }
  }
  for (const root of roots) {
    for (let dir = root;; dir = dirname(dir)) {
      for (const name of names) {
        const candidate = join(dir, "node_modules", ".bin", name);
        if (isExecutable(candidate)) return candidate;
      }
      if (dirname(dir) === dir) break;
    }
  }
  return undefined;
}

/** Parses a memory size in the engines' syntax ("512m", "1g", "1048576") into bytes. */
export function memoryBytes(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([bkmg]?)b?$/i.exec(value.trim());
  if (!match) {
    throw new RangeError(`Invalid memory size "${value}": use a number with an optional unit, like "512m"`);
  }
  const scale = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[match[2].toLowerCase()] ?? 1;
  return Math.floor(Number(match[1]) * scale);
}

/** The `deno --version` number ("2.9.6"), or undefined when deno doesn't answer like Deno. */
export function parseDenoVersion(output: string): string | undefined {
  return /^deno (\d+\.\d+\.\d+)/m.exec(output)?.[1];
}
