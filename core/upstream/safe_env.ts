/**
 * The environment a stdio MCP server starts with: a short allow-list copied from the host, never the rest
 * (the host environment is where API keys and tokens live), with the server's own configured `env` on top.
 * @module
 */
import process from "node:process";

/** Host variables passed through on every platform: finding programs, a home, a locale, a temp dir, CAs. */
export const SAFE_ENV_NAMES: readonly string[] = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TERM",
  "TMPDIR",
  "TZ",
  "XDG_RUNTIME_DIR",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
];

/** Extra host variables passed through on Windows, where programs fail to start without them. */
export const SAFE_ENV_NAMES_WINDOWS: readonly string[] = [
  "APPDATA",
  "COMSPEC",
  "HOMEDRIVE",
  "HOMEPATH",
  "LOCALAPPDATA",
  "PATHEXT",
  "PROCESSOR_ARCHITECTURE",
  "PROGRAMDATA",
  "PROGRAMFILES",
  "PROGRAMFILES(X86)",
  "PROGRAMW6432",
  "SYSTEMDRIVE",
  "SYSTEMROOT",
  "TEMP",
  "TMP",
  "USERNAME",
  "USERPROFILE",
  "WINDIR",
];

/** Prefixes of host variables passed through (locale categories). */
export const SAFE_ENV_PREFIXES: readonly string[] = ["LC_"];

/** Returns the allow-listed part of `host`; Windows names match case-insensitively, as Windows does. */
export function safeEnv(
  host: Record<string, string | undefined> = process.env,
  platform: string = process.platform,
): Record<string, string> {
  const windows = platform === "win32";
  const names = new Set(windows ? [...SAFE_ENV_NAMES, ...SAFE_ENV_NAMES_WINDOWS] : SAFE_ENV_NAMES);
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(host)) {
    if (value === undefined) continue;
    // Bash exports functions as "() { ...": executable text, not configuration.
    if (value.startsWith("()")) continue;
    const name = windows ? key.toUpperCase() : key;
    if (names.has(name) || SAFE_ENV_PREFIXES.some((prefix) => name.startsWith(prefix))) env[key] = value;
  }
  return env;
}

/** The environment for one stdio server: the safe base with the server's configured `env` on top. */
export function serverEnv(
  spec: { env?: Record<string, string> },
  host?: Record<string, string | undefined>,
  platform?: string,
): Record<string, string> {
  return { ...safeEnv(host, platform), ...spec.env };
}
