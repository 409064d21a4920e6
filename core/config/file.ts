/**
 * codemode's own config file: settings and policy as YAML or JSON. One file is read, the first that exists
 * of: `$CODEMODE_CONFIG` (when set, the only candidate), `./codemode.yaml|.yml|.json` in the working
 * directory, then `$XDG_CONFIG_HOME/codemode/config.yaml|.yml|.json` (`~/.config/codemode/...`). So a
 * project file replaces the user file entirely; environment variables override either, key by key.
 * This module finds and parses; settings.ts validates the keys.
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";

/** A parsed config file: where it is and its top-level keys. */
export interface ConfigFile {
  path: string;
  values: Record<string, unknown>;
  /** Other candidates that exist but lost to this one (doctor mentions them). */
  ignored?: string[];
}

/** A config file that cannot be read or parsed; the message names the file. */
export class ConfigFileError extends SyntaxError {
  /** Creates the error for the file at `path`. */
  constructor(readonly path: string, message: string) {
    super(message);
    this.name = "ConfigFileError";
  }
}

const NAMES = ["yaml", "yml", "json"];

/** Where codemode looks for its config file, best first. */
export function configCandidates(env: Record<string, string | undefined>, cwd: string): string[] {
  if (env.CODEMODE_CONFIG) return [resolve(cwd, env.CODEMODE_CONFIG)];
  const userDir = userConfigDir(env);
  return [
    ...NAMES.map((ext) => join(cwd, `codemode.${ext}`)),
    ...NAMES.map((ext) => join(userDir, `config.${ext}`)),
  ];
}

/** codemode's own config directory: `$XDG_CONFIG_HOME/codemode`, else `~/.config/codemode`. */
export function userConfigDir(env: Record<string, string | undefined>): string {
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config"), "codemode");
}

/**
 * Reads the config file that wins (see the module doc); undefined when there is none. Throws
 * ConfigFileError when it cannot be read or parsed, or when `CODEMODE_CONFIG` names a missing file.
 */
export function readConfigFile(
  env: Record<string, string | undefined> = process.env,
  cwd: string = process.cwd(),
): ConfigFile | undefined {
  const candidates = configCandidates(env, cwd);
  const found = candidates.filter((path) => existsSync(path));
  if (!found.length) {
    if (env.CODEMODE_CONFIG) {
      throw new ConfigFileError(
        candidates[0],
        `Cannot read config "${
          candidates[0]
        }" (named by CODEMODE_CONFIG): no such file; fix or unset CODEMODE_CONFIG`,
      );
    }
    return undefined;
  }
  let text: string;
  try {
    text = readFileSync(found[0], "utf8");
  } catch (error) {
    throw new ConfigFileError(found[0], `Cannot read config "${found[0]}": ${(error as Error).message}`);
  }
  const file = parseConfigFile(found[0], text);
  return found.length > 1 ? { ...file, ignored: found.slice(1) } : file;
}

/** Parses a config file's text (JSON for `.json`, else YAML); the top level must be a mapping. */
export function parseConfigFile(path: string, text: string): ConfigFile {
  let data: unknown;
  try {
    data = path.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    const detail = String((error as Error).message).split("\n")[0].replace(/:$/, "");
    throw new ConfigFileError(path, `Cannot parse config "${path}": ${detail}`);
  }
  if (data === null || data === undefined) return { path, values: {} };
  if (typeof data !== "object" || Array.isArray(data)) {
    throw new ConfigFileError(
      path,
      `Cannot use config "${path}": expected a mapping of settings (key: value) at the top level`,
    );
  }
  return { path, values: data as Record<string, unknown> };
}
