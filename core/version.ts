/**
 * The codemode version, kept in one place (package.json says the same: tests/unit/package_test.ts), and
 * how this copy was installed, which the entry point that started it declares: a checkout (`cli.ts`), the
 * npm package (`scripts/npm_entry.ts`) or a release binary (`scripts/compile_entry.ts`).
 * @module
 */
import process from "node:process";

/** The codemode version. */
export const VERSION = "0.1.0";

/** How this codemode was installed. */
export type InstallKind = "checkout" | "npm" | "binary";

let kind: InstallKind = "checkout";

/** Declared once by the entry point, before anything asks. */
export function setInstallKind(value: InstallKind): void {
  kind = value;
}

/** How this codemode was installed (a checkout unless its entry point said otherwise). */
export function installKind(): InstallKind {
  return kind;
}

/** What `codemode --version` prints: the version, then how it was installed ("0.1.0 (npm)"). */
export function versionLine(): string {
  const platform = kind === "binary" ? `, ${process.platform}-${process.arch}` : "";
  return `${VERSION} (${kind}${platform})`;
}
