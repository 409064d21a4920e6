/**
 * The `pyodide` runtime: Python compiled to WebAssembly, for machines without a container engine.
 *
 * Python in Pyodide can reach JavaScript (`import js`, any JsProxy), so the JavaScript around it is the
 * thing to lock down: Pyodide runs in a separate `deno run` process that may read the Pyodide files and
 * its own program and nothing else (no other file, network, environment, subprocess, FFI or write
 * access), with an empty environment and capped heaps. When no deno executable is found the runtime is
 * unavailable: it never runs Pyodide inside codemode's own process. See docs/pyodide.md.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { Readable, Writable } from "node:stream";
import { Buffer } from "node:buffer";
import type {
  ManagedSandbox,
  Problem,
  RuntimeDetection,
  RuntimePlugin,
  SandboxProcess,
  SandboxStartOptions,
} from "../../core/contracts/runtime.ts";
import { log } from "../../core/observe/log.ts";
import { denoArgs, denoEnv, findDeno, memoryBytes, parseDenoVersion } from "./_pyodide_deno.ts";
import {
  cacheDir,
  embeddedAssets,
  findPyodideAssets,
  installPyodideAssets,
  isDistribution,
  type ProgressCallback,
  pyodideVersion,
  searchRoots,
  snapshotPath,
  stderrProgress,
  writeAtomically,
  writeHostProgram,
} from "./_pyodide_files.ts";
import type { HostConfig } from "./pyodide_host.ts";

export { installPyodideAssets, type PrepareProgress, type ProgressCallback } from "./_pyodide_files.ts";

/** Options of the pyodide runtime. */
export interface PyodideOptions {
  /**
   * The Pyodide distribution (default: the files compiled into this binary, unpacked into the state
   * directory on first use; else node_modules/pyodide above this module or the working directory).
   */
  assetDir?: string;
  /** Where the host program and snapshot are cached, under `pyodide/<version>/` (default: codemode's). */
  stateDir?: string;
  /** The deno executable (default: the running deno, else `deno` on PATH, else node_modules/.bin/deno). */
  deno?: string;
  /** Start from a memory snapshot made on first use (~0.5 s instead of ~5 s per start). */
  snapshot?: boolean;
  /** How long making the snapshot may take. */
  snapshotTimeoutMs?: number;
  /** Progress of first-use preparation (default for a compiled binary: lines on stderr if a terminal). */
  onProgress?: ProgressCallback;
}

/** Default options. */
export const defaults = { snapshot: true, snapshotTimeoutMs: 180_000 } as const;

/** What a start needs, worked out once per plugin instance. */
interface Prepared {
  deno: string;
  assets: string;
  cache: string;
  program: string;
  snapshot?: string;
  version: string;
}

/** The pyodide runtime plugin. */
export function pyodide(options: PyodideOptions = {}): RuntimePlugin {
  const settings = { ...defaults, ...options };
  let prepared: Promise<Prepared> | undefined;

  const locate = () => {
    const deno = findDeno(settings.deno, searchRoots());
    const assets = settings.assetDir ?? embeddedAssets() ?? findPyodideAssets(searchRoots());
    return { deno, assets };
  };
  // A compiled binary's first use unpacks ~13 MB and makes a snapshot (~10 s): say so on a terminal.
  const terminal = stderrProgress();
  const progress = (): ProgressCallback | undefined =>
    settings.onProgress ?? (embeddedAssets() && process.stderr.isTTY ? terminal : undefined);

  async function detect(): Promise<RuntimeDetection> {
    const problems: Problem[] = [];
    const { deno, assets } = locate();
    if (!deno) {
      problems.push({
        message: "Deno is not installed, and Pyodide is only run inside a locked-down Deno process",
        fix: "Install Deno 2 (https://deno.com) and put it on PATH, or pass its path as the deno option",
      });
    }
    let version: string | undefined;
    if (!assets || !isDistribution(assets)) {
      problems.push({
        message: `The Pyodide files are missing${typeof assets === "string" ? ` from "${assets}"` : ""}`,
        fix: "Install the npm package pyodide (npm install), or pass the assetDir option",
      });
    } else {
      version = pyodideVersion(assets);
    }
    let denoVersion: string | undefined;
    if (deno) {
      const result = await capture(deno, ["--version"], 15_000);
      denoVersion = parseDenoVersion(result.stdout);
      if (!denoVersion) {
        problems.push({
          message: `"${deno}" does not run as Deno: "${
            (result.stderr || result.stdout).trim().slice(0, 200)
          }"`,
          fix: "Install Deno 2 (https://deno.com), or pass its path as the deno option",
        });
      } else if (Number(denoVersion.split(".")[0]) < 2) {
        problems.push({
          message: `Deno ${denoVersion} is too old for the Pyodide sandbox`,
          fix: "Upgrade to Deno 2",
        });
      }
    }
    const available = problems.length === 0;
    return {
      name: "pyodide",
      available,
      ...(version ? { version: `${version} (deno ${denoVersion ?? "missing"})` } : {}),
      problems,
    };
  }

  function prepare(): Promise<Prepared> {
    prepared ??= (async () => {
      const { deno, assets } = locate();
      if (!deno) {
        throw new Error(
          "Cannot start a Pyodide sandbox: Deno is not installed, and codemode never runs Pyodide in its own " +
            "process; install Deno 2 or choose a container runtime",
        );
      }
      if (!assets || !isDistribution(assets)) {
        throw new Error(
          `Cannot start a Pyodide sandbox: the Pyodide files are missing${
            typeof assets === "string" ? ` from "${assets}"` : ""
          }; ` +
            "run npm install or pass the assetDir option",
        );
      }
      const version = pyodideVersion(assets);
      const stateDir = settings.stateDir ?? defaultStateDir();
      const cache = cacheDir(stateDir, version);
      // Embedded files are unpacked into the cache, the one directory the subprocess may read.
      const dir = typeof assets === "string"
        ? assets
        : await installPyodideAssets(assets, stateDir, progress());
      const program = await writeHostProgram(cache);
      const base = { deno, assets: withSlash(dir), cache, program, version };
      const snapshot = settings.snapshot ? await ensureSnapshot(base) : undefined;
      return { ...base, ...(snapshot ? { snapshot } : {}) };
    })();
    prepared.catch(() => prepared = undefined);
    return prepared;
  }

  async function ensureSnapshot(base: Omit<Prepared, "snapshot">): Promise<string | undefined> {
    const path = snapshotPath(base.cache, base.program, base.version);
    if (existsSync(path)) return path;
    progress()?.({
      phase: "snapshot",
      done: 0,
      total: 1,
      message: "Making the Pyodide start-up snapshot",
    });
    const started = performance.now();
    const config: HostConfig = { mode: "snapshot", assets: base.assets, memoryBytes: 2 ** 30 };
    const argv = denoArgs({
      deno: base.deno,
      program: base.program,
      readable: readable(base),
      heapBytes: 2 ** 30,
      config,
    });
    const result = await capture(
      argv[0],
      argv.slice(1),
      settings.snapshotTimeoutMs,
      denoEnv(base.program),
      true,
    );
    if (result.code !== 0 || result.bytes.length < 1024 * 1024) {
      log.warn("could not make a Pyodide snapshot; sandboxes will start slowly", {
        code: result.code,
        stderr: result.stderr.slice(-2000),
      });
      return undefined;
    }
    await writeAtomically(path, result.bytes);
    progress()?.({
      phase: "snapshot",
      done: 1,
      total: 1,
      message: "Pyodide start-up snapshot ready",
    });
    log.info("made a Pyodide snapshot", { path, ms: Math.round(performance.now() - started) });
    return path;
  }

  async function start(start: SandboxStartOptions): Promise<SandboxProcess> {
    const dash = start.command.indexOf("-c");
    const bootstrap = dash >= 0 ? start.command[dash + 1] : undefined;
    if (bootstrap === undefined) {
      throw new Error(
        `Cannot start a Pyodide sandbox for "${start.name}": its command must be "python3 -c <bootstrap>", ` +
          `got "${start.command.slice(0, 3).join(" ")}"`,
      );
    }
    const p = await prepare();
    const memory = memoryBytes(start.limits.memory);
    const config: HostConfig = {
      mode: "serve",
      assets: p.assets,
      memoryBytes: memory,
      bootstrap,
      ...(p.snapshot ? { snapshot: p.snapshot } : {}),
    };
    const argv = denoArgs({
      deno: p.deno,
      program: p.program,
      readable: readable(p),
      heapBytes: memory,
      config,
    });
    const child = spawn(argv[0], argv.slice(1), {
      cwd: process.platform === "win32" ? p.cache : "/",
      env: denoEnv(p.program),
      stdio: ["pipe", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once(
        "error",
        (error) => reject(new Error(`Cannot start a Pyodide sandbox with "${p.deno}": ${error.message}`)),
      );
    });
    return sandboxProcess(child);
  }

  return {
    name: "pyodide",
    // No host folder is ever readable from the Deno process: mounted files are copied in over the channel.
    mountMode: "copy",
    detect,
    start,
    listManaged: (): Promise<ManagedSandbox[]> => Promise.resolve([]),
    remove: (): Promise<void> => Promise.resolve(),
  };
}

/** Wraps a child process as a SandboxProcess whose kill() ends it at once. */
function sandboxProcess(child: ChildProcess): SandboxProcess {
  // A write after the sandbox died must reject the writer, not crash the host with an unhandled 'error'.
  child.stdin!.on("error", () => {});
  let ended = child.exitCode !== null || child.signalCode !== null;
  const exited = new Promise<number | null>((resolve) => {
    if (ended) return resolve(child.exitCode);
    child.once("exit", (code) => {
      ended = true;
      resolve(code);
    });
  });
  let killing: Promise<void> | undefined;
  const kill = () =>
    killing ??= (async () => {
      if (!ended) child.kill("SIGKILL");
      await exited;
    })();
  return {
    stdin: Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
    stdout: Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
    stderr: Readable.toWeb(child.stderr!) as ReadableStream<Uint8Array>,
    kill,
    exited,
  };
}

function readable(p: { assets: string; cache: string }): string[] {
  const assets = p.assets.replace(/[\\/]+$/, "");
  return assets === p.cache ? [p.cache] : [assets, p.cache];
}

function withSlash(dir: string): string {
  return /[\\/]$/.test(dir) ? dir : `${dir}/`;
}

function defaultStateDir(): string {
  const xdg = process.env.XDG_STATE_HOME;
  return xdg ? join(xdg, "codemode") : join(process.env.HOME || homedir(), ".local", "state", "codemode");
}

interface Captured {
  code: number;
  stdout: string;
  stderr: string;
  bytes: Uint8Array;
}

/** Runs a command to completion with a time limit; never rejects. */
function capture(
  command: string,
  args: string[],
  timeoutMs: number,
  env: Record<string, string> = denoEnv(command),
  binary = false,
): Promise<Captured> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: "/", env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Uint8Array[] = [];
    let stderr = "";
    child.stdout.on("data", (chunk: Uint8Array) => out.push(chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => stderr = (stderr + chunk).slice(-8192));
    const timer = setTimeout(() => {
      stderr += `\nTimed out after ${timeoutMs} ms`;
      child.kill("SIGKILL");
    }, timeoutMs);
    const finish = (code: number) => {
      clearTimeout(timer);
      const bytes = Buffer.concat(out);
      resolve({ code, stdout: binary ? "" : bytes.toString("utf8"), stderr, bytes });
    };
    child.on("error", (error) => {
      stderr += error.message;
      finish(-1);
    });
    child.on("close", (code) => finish(code ?? -1));
  });
}
