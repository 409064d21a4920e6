/**
 * The Pyodide files a compiled binary carries, registered by its entry point at start-up. Kept apart from
 * the code that unpacks them, so registering costs the binary's start-up nothing but this module.
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

/** Pyodide files by name (each of {@link PYODIDE_FILES}), each a path node:fs can read. */
export type PyodideFileMap = Readonly<Record<string, string>>;

let embedded: PyodideFileMap | undefined;

/**
 * Registers the Pyodide files compiled into this binary (scripts/compile_entry.ts). The runtime then
 * unpacks them into its cache directory on first use instead of looking for node_modules.
 */
export function provideEmbeddedAssets(files: PyodideFileMap): void {
  const missing = PYODIDE_FILES.filter((file) => !files[file]);
  if (missing.length) {
    throw new Error(`The embedded Pyodide files lack "${missing.join('", "')}": add them to the entry point`);
  }
  embedded = Object.fromEntries(PYODIDE_FILES.map((file) => [file, files[file]]));
}

/** The Pyodide files compiled into this binary, if it is a compiled binary that has them. */
export function embeddedAssets(): PyodideFileMap | undefined {
  return embedded;
}

/** A Pyodide distribution: a directory, or the files one by one (as a compiled binary embeds them). */
export type PyodideSource = string | PyodideFileMap;
