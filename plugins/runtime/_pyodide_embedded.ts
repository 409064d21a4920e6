/**
 * What a compiled binary carries for its embedded runtime (scripts/embed_runtime.ts makes it in
 * dist/embed/, scripts/compile_entry.ts registers it at start-up): a Deno executable, the Pyodide files,
 * the host program and a start-up snapshot made from them at build time, with a manifest of their
 * digests. Kept apart from the code that unpacks them (_embedded_unpack.ts), so registering costs the
 * binary's start-up nothing but this module. The npm package, which has Deno and Pyodide on disk, carries
 * only its start-up snapshots, and registers their folder here too (scripts/npm_entry.ts).
 * @module
 */

/** The files of the Pyodide npm package the sandbox loads. */
export const PYODIDE_FILES: readonly string[] = [
  "package.json",
  "pyodide.mjs",
  "pyodide.asm.mjs",
  "pyodide.asm.wasm",
  "python_stdlib.zip",
  "pyodide-lock.json",
];

/** One entry of the build manifest (dist/embed/manifest.json). */
export interface ManifestFile {
  /** Which unpack directory it goes to. */
  dir: "deno" | "pyodide";
  /** Its name there. */
  name: string;
  /** Permission bits once unpacked (0o700 for the executable, 0o600 for the rest). */
  mode: number;
  /** How the binary stores it. */
  encoding: "zstd" | "identity";
  sha256: string;
  size: number;
}

/** The build manifest: the platform, the versions, and every file by key. */
export interface EmbedManifest {
  /** The platform the binary was built for, as `<os>-<arch>` ("linux-x64"). */
  target: string;
  deno: string;
  pyodide: string;
  /** Keys: "deno", "host", "snapshot", and each of the Pyodide files by its name. */
  files: Record<string, ManifestFile>;
}

/** The embedded runtime: its manifest and, per key, the path of the carried bytes. */
export interface EmbeddedRuntime {
  manifest: EmbedManifest;
  sources: Record<string, string>;
}

let embedded: EmbeddedRuntime | undefined;

/** Registers what this binary carries (scripts/compile_entry.ts); every manifest file needs a source. */
export function provideEmbeddedRuntime(manifest: EmbedManifest, sources: Record<string, string>): void {
  const missing = Object.keys(manifest.files).filter((key) => !sources[key]);
  if (missing.length) {
    throw new Error(`The embedded runtime lacks "${missing.join('", "')}": add them to the entry point`);
  }
  for (const key of ["deno", "host", "snapshot"]) {
    if (!manifest.files[key]) throw new Error(`The embed manifest has no "${key}": rebuild the binary`);
  }
  embedded = { manifest, sources };
}

/** The runtime compiled into this binary, if it is a compiled binary that has one. */
export function embeddedRuntime(): EmbeddedRuntime | undefined {
  return embedded;
}

let snapshots: string | undefined;

/**
 * Registers the folder of start-up snapshots the npm package carries (scripts/npm_entry.ts), laid out
 * `<folder>/<pyodide version>/snapshot-<hash>.bin`; the runtime copies the one that fits into the state
 * directory.
 */
export function providePrebuiltSnapshots(folder: string): void {
  snapshots = folder;
}

/** The folder registered by {@link providePrebuiltSnapshots}, if any. */
export function prebuiltSnapshots(): string | undefined {
  return snapshots;
}
