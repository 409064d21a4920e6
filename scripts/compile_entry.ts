/**
 * The compiled binary's entry point (scripts/compile.sh; Bun only). A binary has no node_modules and may
 * run where no Deno is installed, so it carries its embedded runtime (dist/embed/, made by
 * scripts/embed_runtime.ts): a Deno executable, the Pyodide files, the host program and a start-up
 * snapshot, with a manifest of their digests. Bun's `with { type: "file" }` compiles each file in and
 * yields a path node:fs can read; the pyodide runtime unpacks them into the state directory on first use.
 * The top-level help is rendered at build time (a Bun macro import), so `--help`, like `--version`,
 * answers without loading the command parser. Deno rejects these import attributes, so deno.json
 * excludes this file.
 * @module
 */
import manifest from "../dist/embed/manifest.json" with { type: "json" };
import deno from "../dist/embed/deno.zst" with { type: "file" };
import host from "../dist/embed/host.mjs" with { type: "file" };
import snapshot from "../dist/embed/snapshot.bin.zst" with { type: "file" };
import packageJson from "../dist/embed/package.json.zst" with { type: "file" };
import pyodideMjs from "../dist/embed/pyodide.mjs.zst" with { type: "file" };
import asmMjs from "../dist/embed/pyodide.asm.mjs.zst" with { type: "file" };
import asmWasm from "../dist/embed/pyodide.asm.wasm.zst" with { type: "file" };
import stdlib from "../dist/embed/python_stdlib.zip.zst" with { type: "file" };
import lock from "../dist/embed/pyodide-lock.json.zst" with { type: "file" };
import { provideEmbeddedRuntime } from "../plugins/runtime/_pyodide_embedded.ts";
import { main } from "../cli/main.ts";
import { setInstallKind } from "../core/version.ts";
import { topLevelHelp } from "../cli/help_text.ts" with { type: "macro" };

setInstallKind("binary");
provideEmbeddedRuntime(manifest as Parameters<typeof provideEmbeddedRuntime>[0], {
  deno,
  host,
  snapshot,
  "package.json": packageJson,
  "pyodide.mjs": pyodideMjs,
  "pyodide.asm.mjs": asmMjs,
  "pyodide.asm.wasm": asmWasm,
  "python_stdlib.zip": stdlib,
  "pyodide-lock.json": lock,
});
process.exitCode = await main(process.argv.slice(2), { help: topLevelHelp() });
