/**
 * How the compiled binary starts (scripts/compile.sh; Bun only). A binary has no node_modules and may
 * run where no Deno is installed, so it carries its embedded runtime (dist/embed/<target>/, made by
 * scripts/embed_runtime.ts): a Deno executable, the Pyodide files, the host program and a start-up
 * snapshot, with a manifest of their digests. The entry point embed_runtime.ts generates beside them
 * imports each file with Bun's `with { type: "file" }` (which compiles it in and yields a path node:fs can
 * read) and calls {@link startBinary}; the pyodide runtime unpacks them into the state directory on first
 * use. The top-level help is rendered at build time (a Bun macro import), so `--help`, like `--version`,
 * answers without loading the command parser. Deno rejects these import attributes, so deno.json
 * excludes this file.
 * @module
 */
import { type EmbedManifest, provideEmbeddedRuntime } from "../plugins/runtime/_pyodide_embedded.ts";
import { main } from "../cli/main.ts";
import { setInstallKind } from "../core/version.ts";
import { topLevelHelp } from "../cli/help_text.ts" with { type: "macro" };

/** Runs the CLI of a binary carrying `sources` (a path per manifest key) as `manifest` describes. */
export async function startBinary(manifest: unknown, sources: Record<string, string>): Promise<void> {
  setInstallKind("binary");
  provideEmbeddedRuntime(manifest as EmbedManifest, sources);
  process.exitCode = await main(process.argv.slice(2), { help: topLevelHelp() });
}
