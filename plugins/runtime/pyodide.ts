/**
 * The `pyodide` runtime: Python compiled to WebAssembly, for machines without a container engine.
 *
 * Python in Pyodide can reach JavaScript (`import js`, any JsProxy), so the JavaScript around it is the
 * thing to lock down: Pyodide runs in a separate `deno run` process that may read the Pyodide files and
 * its own program and nothing else (no other file, network, environment, subprocess, FFI or write
 * access), with an empty environment and capped heaps. A compiled binary carries its own Deno (unpacked
 * into the state directory on first use, its digest checked before every launch); from a checkout the
 * running deno is used. Pyodide never runs inside codemode's own process. See docs/pyodide.md.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, join } from "node:path";
import process from "node:process";
import { Readable, Writable } from "node:stream";
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
  copyAtomically,
  findPyodideAssets,
  isDistribution,
  prebuiltDir,
  type ProgressCallback,
  pyodideVersion,
  searchRoots,
  snapshotPath,
  stderrProgress,
  writeAtomically,
  writeHostProgram,
} from "./_pyodide_files.ts";
import { capture, makeSnapshot, type Preload, preloadKey } from "./_pyodide_snapshot.ts";
import { type EmbeddedRuntime, embeddedRuntime } from "./_pyodide_embedded.ts";
import { unpackedLayout, unpackEmbedded } from "./_embedded_unpack.ts";
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
  /**
   * The deno executable (default: the one compiled into this binary; else the running deno, `deno` on
   * PATH, or node_modules/.bin/deno).
   */
  deno?: string;
  /**
   * The runtime files a compiled binary carries (default: this binary's, if any; `false`: none). Ignored
   * when `deno` or `assetDir` is given.
   */
  embedded?: EmbeddedRuntime | false;
  /** Start from a memory snapshot (~0.5 s instead of ~5 s per start): carried, prebuilt or made once. */
  snapshot?: boolean;
  /** How long making the snapshot may take. */
  snapshotTimeoutMs?: number;
  /**
   * The sandbox runtime (bootstrap source, modules, packages) to import into the snapshot, so a session
   * restored from it skips compiling the runtime; a session with other modules installs its own.
   */
  preload?: Preload;
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
  const stateDir = () => settings.stateDir ?? defaultStateDir();
  const carried = (): EmbeddedRuntime | undefined =>
    settings.deno || settings.assetDir || settings.embedded === false
      ? undefined
      : settings.embedded ?? embeddedRuntime();
  let prepared: Promise<Prepared> | undefined;

  const locate = () => {
    const deno = findDeno(settings.deno, searchRoots());
    const assets = settings.assetDir ?? findPyodideAssets(searchRoots());
    return { deno, assets };
  };
  // A first use may unpack ~140 MB or make a snapshot (~10 s): say so on a terminal.
  const terminal = stderrProgress();
  const progress = (): ProgressCallback | undefined =>
    settings.onProgress ?? (embeddedRuntime() && process.stderr.isTTY ? terminal : undefined);

  async function detect(): Promise<RuntimeDetection> {
    const embedded = carried();
    if (embedded) {
      // Nothing to look for: the binary carries both, built for the platform it runs on.
      const m = embedded.manifest;
      return {
        name: "pyodide",
        available: true,
        version: `${m.pyodide} (deno ${m.deno}, embedded)`,
        problems: [],
      };
    }
    const problems: Problem[] = [];
    const { deno, assets } = locate();
    if (!deno) {
      problems.push({
        message: "Deno is not installed, and Pyodide is only run inside a locked-down Deno process",
        fix: "Install Deno 2 (https://deno.com) and put it on PATH, pass its path as the deno option, " +
          "or use the codemode binary, which carries its own",
      });
    }
    let version: string | undefined;
    if (!assets || !isDistribution(assets)) {
      problems.push({
        message: `The Pyodide files are missing${assets ? ` from "${assets}"` : ""}`,
        fix: "Install the npm package pyodide (npm install), or pass the assetDir option",
      });
    } else {
      version = pyodideVersion(assets);
    }
    let denoVersion: string | undefined;
    if (deno) {
      const result = await capture(deno, ["--version"], 15_000, denoEnv(deno));
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

  /** What the verdict rests on: the carried files' digests, or the deno binary and the Pyodide files. */
  async function fingerprint(): Promise<string | undefined> {
    const embedded = carried();
    if (embedded) {
      const m = embedded.manifest;
      return `embedded ${m.target} deno ${m.deno} ${m.files.deno.sha256} pyodide ${m.pyodide}`;
    }
    const { deno, assets } = locate();
    const about = async (path: string | undefined) => {
      const s = path ? await stat(path).catch(() => undefined) : undefined;
      return s ? `${path} ${s.size} ${s.mtimeMs}` : `${path ?? "-"} missing`;
    };
    const pkg = assets ? join(assets, "package.json") : undefined;
    return `deno ${await about(deno)}; pyodide ${await about(pkg)}`;
  }

  function prepare(): Promise<Prepared> {
    prepared ??= (async () => {
      const embedded = carried();
      if (embedded) return await prepareEmbedded(embedded);
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
            assets ? ` from "${assets}"` : ""
          }; ` +
            "run npm install or pass the assetDir option",
        );
      }
      const version = pyodideVersion(assets);
      const cache = cacheDir(stateDir(), version);
      const program = await writeHostProgram(cache);
      const base = { deno, assets: withSlash(assets), cache, program, version };
      const snapshot = settings.snapshot ? await sourceSnapshot(base) : undefined;
      return { ...base, ...(snapshot ? { snapshot } : {}) };
    })();
    prepared.catch(() => prepared = undefined);
    return prepared;
  }

  async function prepareEmbedded(embedded: EmbeddedRuntime): Promise<Prepared> {
    const layout = unpackedLayout(embedded, stateDir());
    const first = !existsSync(layout.deno);
    if (first) {
      progress()?.({ phase: "copy", done: 0, total: 1, message: "Unpacking the embedded Deno and Pyodide" });
    }
    await unpack(embedded);
    if (first) progress()?.({ phase: "copy", done: 1, total: 1, message: "Embedded runtime ready" });
    return {
      deno: layout.deno,
      assets: withSlash(layout.pyodide),
      cache: layout.pyodide,
      program: layout.program,
      version: embedded.manifest.pyodide,
      ...(settings.snapshot ? { snapshot: layout.snapshot } : {}),
    };
  }

  /** Every carried file present and intact: unpacked, kept, or (changed since) replaced. */
  async function unpack(embedded: EmbeddedRuntime): Promise<void> {
    const report = await unpackEmbedded(embedded, stateDir());
    const changed = Object.entries(report.outcomes).filter(([, outcome]) => outcome !== "verified");
    const replaced = changed.filter(([, outcome]) => outcome === "replaced").map(([key]) => key);
    if (replaced.length) {
      log.warn("embedded runtime files did not match their digests and were replaced", {
        files: replaced,
        stateDir: stateDir(),
      });
    }
    if (changed.length) {
      log.info("unpacked the embedded runtime", {
        files: changed.map(([key]) => key),
        ms: Math.round(report.ms),
      });
    }
  }

  /**
   * The snapshot for a checkout or the npm package: cached, copied from the one made ahead of time (the
   * checkout's dist/pyodide/, the package's dist/npm/pyodide/), or made now.
   */
  async function sourceSnapshot(base: Omit<Prepared, "snapshot">): Promise<string | undefined> {
    const path = snapshotPath(base.cache, base.program, base.version, preloadKey(settings.preload));
    if (existsSync(path)) return path;
    const shipped = prebuiltDir(base.version);
    if (shipped && existsSync(join(shipped, basename(path)))) {
      await copyAtomically(join(shipped, basename(path)), path);
      return path;
    }
    progress()?.({ phase: "snapshot", done: 0, total: 1, message: "Making the Pyodide start-up snapshot" });
    const made = await makeSnapshot({
      ...base,
      readable: readable(base),
      timeoutMs: settings.snapshotTimeoutMs,
      ...(settings.preload ? { preload: settings.preload } : {}),
    });
    if (!made.ok) {
      log.warn("could not make a Pyodide snapshot; sandboxes will start slowly", { reason: made.reason });
      return undefined;
    }
    await writeAtomically(path, made.bytes);
    progress()?.({ phase: "snapshot", done: 1, total: 1, message: "Pyodide start-up snapshot ready" });
    log.info("made a Pyodide snapshot", { path, ms: Math.round(made.ms) });
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
    // Before every launch: a carried file changed since this process checked it is replaced, never run.
    const embedded = carried();
    if (embedded) await unpack(embedded);
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
    isolation: "wasm",
    // No host folder is ever readable from the Deno process: mounted files are copied in over the channel.
    mountMode: "copy",
    detect,
    fingerprint,
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
