#!/usr/bin/env node
// The `codemode` command of the npm package: runs codemode's CLI under the Deno of the package's `deno`
// dependency. The CLI is JavaScript bundled when the package was packed (dist/npm/codemode.js, see
// scripts/build_npm.ts); in a checkout (cli.ts beside this folder) the TypeScript sources run instead.
// Node only starts Deno and passes on its exit: stdin, stdout (the MCP protocol for `serve`) and stderr
// are Deno's own. Nothing is written anywhere: the platform's Deno is used where npm put it.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const checkout = existsSync(join(root, "cli.ts"));
const entry = checkout ? join(root, "cli.ts") : join(root, "dist", "npm", "codemode.js");

/** The npm package holding Deno for this platform, as the `deno` package names them. */
function platformPackage() {
  const { platform, arch } = process;
  if (platform === "linux") return `@deno/linux-${arch}-glibc`;
  return `@deno/${platform}-${arch}`;
}

/** The Deno executable: the one `deno`'s install script linked into its folder, else its platform package's. */
function findDeno() {
  const exe = process.platform === "win32" ? "deno.exe" : "deno";
  const require = createRequire(join(root, "package.json"));
  let denoDir;
  try {
    denoDir = dirname(require.resolve("deno/package.json"));
  } catch {
    return { error: 'the "deno" package is not installed next to codemode' };
  }
  if (existsSync(join(denoDir, exe))) return { path: join(denoDir, exe) };
  const pkg = platformPackage();
  try {
    const found = join(
      dirname(createRequire(join(denoDir, "package.json")).resolve(`${pkg}/package.json`)),
      exe,
    );
    if (existsSync(found)) return { path: found };
  } catch { /* below */ }
  return { error: `${pkg} (Deno for ${process.platform}-${process.arch}) is not installed` };
}

const deno = findDeno();
if (!deno.path) {
  process.stderr.write(
    `codemode: cannot start: ${deno.error}. Reinstall codemode with npm (optional dependencies and install ` +
      "scripts enabled), or use a release binary, which carries its own Deno.\n",
  );
  process.exit(1);
}

// The package's own node_modules resolve its imports (--node-modules-dir=manual); a deno.json or
// package.json in the user's working directory must not change how codemode runs (--no-config), and no
// deno.lock is written anywhere (--no-lock). scripts/build_npm.ts runs the bundle with the same flags.
const flags = checkout
  ? ["run", "-A", "--quiet"]
  : ["run", "-A", "--quiet", "--no-config", "--no-lock", "--node-modules-dir=manual"];
const child = spawn(deno.path, [...flags, entry, ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, DENO_NO_UPDATE_CHECK: "1" },
});

// Ctrl-C on a terminal reaches Deno directly (one process group): passing it on as well would interrupt
// codemode's own clean-up. Other signals (an MCP client's SIGTERM) are passed on.
const forwarded = ["SIGTERM", "SIGHUP"];
const pass = (signal) => child.kill(signal);
process.on("SIGINT", () => {});
for (const signal of forwarded) process.on(signal, pass);

child.on("error", (error) => {
  process.stderr.write(`codemode: cannot start Deno ("${deno.path}"): ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die the way Deno died, so a shell or client sees the same signal.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
