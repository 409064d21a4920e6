/**
 * A PATH of coreutils only: what a machine with no Deno, Node, Bun or container engine offers. Shared by
 * the standalone e2e suite and the standalone benchmark (scripts/bench_standalone.ts), so this module has
 * no side effects at import.
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Programs a standalone test must not find on PATH: every way the binary could lean on the machine. */
export const FORBIDDEN = ["deno", "node", "nodejs", "bun", "podman", "docker", "nerdctl", "runc", "crun"];

/**
 * A new temp directory holding only coreutils (symlinks to dpkg's list of them); the caller removes it.
 * Throws when dpkg lists too few programs (not Debian) or the directory would hold a FORBIDDEN one.
 */
export function makeCoreutilsDir(prefix = "codemode-coreutils-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const listed = spawnSync("dpkg", ["-L", "coreutils"], { encoding: "utf8" }).stdout ?? "";
  const names = listed.split("\n").filter((p) => /^\/(usr\/)?bin\/[^/]+$/.test(p));
  if (names.length < 20) {
    throw new Error(`dpkg -L coreutils listed ${names.length} programs; is this Debian?`);
  }
  for (const path of names) {
    const link = join(dir, path.split("/").pop()!);
    if (!existsSync(link)) symlinkSync(path, link);
  }
  const leaked = FORBIDDEN.filter((name) => existsSync(join(dir, name)));
  if (leaked.length) throw new Error(`coreutils PATH holds ${leaked.join(", ")}`);
  return dir;
}
