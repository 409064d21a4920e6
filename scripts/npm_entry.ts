/**
 * The npm package's entry point. scripts/build_npm.ts bundles it with Bun when the package is packed
 * (`npm pack` runs it as `prepack`) into dist/npm/codemode.js, and the package's launcher
 * (bin/codemode.js) runs that under the Deno of the `deno` dependency. npm dependencies stay imports,
 * resolved from the install's node_modules; text and JSON imports (the sandbox's Python, the seccomp
 * profile, the dashboard's files) are inlined. The package carries the Pyodide start-up snapshot made
 * from this very bundle, in dist/npm/pyodide/. The top-level help is rendered at build time (a Bun
 * macro), so `--help` loads no parser. Deno rejects the macro import, so deno.json excludes this file.
 * @module
 */
import { fileURLToPath } from "node:url";
import { main } from "../cli/main.ts";
import { setInstallKind } from "../core/version.ts";
import { providePrebuiltSnapshots } from "../plugins/runtime/_pyodide_embedded.ts";
import { topLevelHelp } from "../cli/help_text.ts" with { type: "macro" };

setInstallKind("npm");
providePrebuiltSnapshots(fileURLToPath(new URL("./pyodide/", import.meta.url)));
process.exitCode = await main(process.argv.slice(2), { help: topLevelHelp() });
