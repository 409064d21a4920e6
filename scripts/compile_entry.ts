/**
 * The compiled binary's entry point (scripts/compile.sh; Bun only). A binary has no node_modules, so it
 * carries the Pyodide files the pyodide runtime needs (PYODIDE_FILES): Bun's `with { type: "file" }`
 * compiles each one in and yields a path node:fs can read, and the runtime unpacks them into the state
 * directory on first use. The top-level help is rendered at build time (a Bun macro import), so
 * `--help`, like `--version`, answers without loading the command parser. Deno rejects these import
 * attributes, so deno.json excludes this file.
 * @module
 */
import packageJson from "../node_modules/pyodide/package.json" with { type: "file" };
import pyodideMjs from "../node_modules/pyodide/pyodide.mjs" with { type: "file" };
import asmMjs from "../node_modules/pyodide/pyodide.asm.mjs" with { type: "file" };
import asmWasm from "../node_modules/pyodide/pyodide.asm.wasm" with { type: "file" };
import stdlib from "../node_modules/pyodide/python_stdlib.zip" with { type: "file" };
import lock from "../node_modules/pyodide/pyodide-lock.json" with { type: "file" };
import { provideEmbeddedAssets } from "../plugins/runtime/_pyodide_embedded.ts";
import { main } from "../cli/main.ts";
import { topLevelHelp } from "../cli/help_text.ts" with { type: "macro" };

provideEmbeddedAssets({
  "package.json": packageJson,
  "pyodide.mjs": pyodideMjs,
  "pyodide.asm.mjs": asmMjs,
  "pyodide.asm.wasm": asmWasm,
  "python_stdlib.zip": stdlib,
  "pyodide-lock.json": lock,
});
process.exitCode = await main(process.argv.slice(2), { help: topLevelHelp() });
