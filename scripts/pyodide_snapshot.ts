/**
 * Makes the Pyodide start-up snapshot ahead of time (with the sandbox runtime imported), so the pyodide runtime's first start with a fresh
 * HOME restores it (well under a second) instead of loading Pyodide and making one (~10 s). Writes
 * `dist/pyodide/<version>/` (the host program and `snapshot-<hash>.bin`) with node_modules' Pyodide and
 * the deno running this script, exactly as the runtime would on first use. scripts/setup.sh and the
 * checkout's `./codemode` run it after `npm install` (not an npm lifecycle script: the published package
 * must carry no install scripts); scripts/embed_runtime.ts reuses what it made for the compiled binary. A snapshot that is
 * already there is kept.
 *
 *   deno run -A scripts/pyodide_snapshot.ts
 * @module
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import process from "node:process";
import { findDeno } from "../plugins/runtime/_pyodide_deno.ts";
import {
  findPyodideAssets,
  prebuiltDir,
  pyodideVersion,
  snapshotPath,
  writeAtomically,
  writeHostProgram,
} from "../plugins/runtime/_pyodide_files.ts";
import { makeSnapshot, preloadKey } from "../plugins/runtime/_pyodide_snapshot.ts";
import { SANDBOX_RUNTIME } from "../sandbox/source.ts";

const ROOT = resolve(new URL("..", import.meta.url).pathname);

/** A snapshot made ahead of time: its path, the host program it belongs to, the Pyodide version. */
export interface Prebuilt {
  snapshot: string;
  program: string;
  version: string;
  /** Whether this call made it (false: it was there). */
  made: boolean;
}

/** Makes (or finds) the snapshot in `dist/pyodide/<version>/`; throws when it cannot be made. */
export async function prebuildSnapshot(): Promise<Prebuilt> {
  const assets = findPyodideAssets([ROOT]);
  if (!assets) throw new Error(`node_modules/pyodide is missing under "${ROOT}": run npm install first`);
  const deno = findDeno(undefined, [ROOT]);
  if (!deno) throw new Error("No deno found to make the Pyodide snapshot with: run npm install first");
  const version = pyodideVersion(assets);
  const dir = prebuiltDir(version) ?? join(ROOT, "dist", "pyodide", version);
  const program = await writeHostProgram(dir);
  const snapshot = snapshotPath(dir, program, version, preloadKey(SANDBOX_RUNTIME));
  if (existsSync(snapshot)) return { snapshot, program, version, made: false };
  const made = await makeSnapshot({
    deno,
    program,
    assets: `${assets}/`,
    readable: [assets, dir],
    timeoutMs: 300_000,
    preload: SANDBOX_RUNTIME,
  });
  if (!made.ok) throw new Error(`Could not make the Pyodide snapshot: ${made.reason}`);
  await writeAtomically(snapshot, made.bytes);
  return { snapshot, program, version, made: true };
}

if (import.meta.main) {
  try {
    const started = performance.now();
    const result = await prebuildSnapshot();
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.error(
      result.made
        ? `pyodide_snapshot: made ${result.snapshot} in ${seconds} s`
        : `pyodide_snapshot: ${result.snapshot} is up to date`,
    );
  } catch (error) {
    // Without the snapshot the runtime makes one on first use.
    console.error(
      `pyodide_snapshot: ${(error as Error).message}; the pyodide runtime makes one on first use`,
    );
    process.exitCode = 1;
  }
}
