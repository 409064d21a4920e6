/**
 * Unpacking what a compiled binary carries (see _pyodide_embedded.ts) into the state directory: Deno
 * into `deno/<version>-<platform>/`, the rest into `pyodide/<version>/`, the one directory the sandbox
 * may read. Every file is checked against the build's digest before every launch (_unpack.ts).
 * @module
 */
import { join, resolve } from "node:path";
import { ensureUnpacked, type PackedFile, type UnpackOutcome } from "./_unpack.ts";
import type { EmbeddedRuntime, EmbedManifest, ManifestFile } from "./_pyodide_embedded.ts";

/** Where the embedded files live once unpacked under `stateDir`. */
export interface UnpackedLayout {
  deno: string;
  /** The Pyodide directory: the distribution, the host program and the snapshot. */
  pyodide: string;
  program: string;
  snapshot: string;
}

/** The paths the embedded files unpack to (nothing is written). */
export function unpackedLayout(runtime: EmbeddedRuntime, stateDir: string): UnpackedLayout {
  const m = runtime.manifest;
  const at = (key: string) => pathOf(m, stateDir, m.files[key]);
  return {
    deno: at("deno"),
    pyodide: join(resolve(stateDir), "pyodide", m.pyodide),
    program: at("host"),
    snapshot: at("snapshot"),
  };
}

/** What unpacking did, per key, and how long it took. */
export interface UnpackReport {
  outcomes: Record<string, UnpackOutcome>;
  ms: number;
}

/**
 * Makes every embedded file present and intact under `stateDir` (all at once: the big ones decompress on
 * the thread pool). Called before every launch; files this process verified cost a stat each.
 */
export async function unpackEmbedded(runtime: EmbeddedRuntime, stateDir: string): Promise<UnpackReport> {
  const started = performance.now();
  const m = runtime.manifest;
  const entries = await Promise.all(
    Object.entries(m.files).map(async ([key, file]) => {
      const packed: PackedFile = {
        source: runtime.sources[key],
        encoding: file.encoding,
        sha256: file.sha256,
        size: file.size,
      };
      return [key, await ensureUnpacked(packed, pathOf(m, stateDir, file), file.mode)] as const;
    }),
  );
  return { outcomes: Object.fromEntries(entries), ms: performance.now() - started };
}

function pathOf(m: EmbedManifest, stateDir: string, file: ManifestFile): string {
  const version = file.dir === "deno" ? `${m.deno}-${m.target}` : m.pyodide;
  return join(resolve(stateDir), file.dir, version, file.name);
}
