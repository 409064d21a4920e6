/**
 * Where skills come from, in order of precedence: `.codemode/skills/` in the working directory `serve`
 * runs in, the user's `~/.config/codemode/skills/` or CODEMODE_SKILLS_DIR (where skills saved from the
 * sandbox are written; a fleet's nodes may share it), then the directories the config file lists under
 * `skills: {dirs: [...]}` (e.g. `~/.claude/skills`).
 * @module
 */
import { lstatSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

/** Whether skills are saved and loaded (`rw`), only loaded (`ro`), or off. */
export type SkillsMode = "rw" | "ro" | "off";

/** One directory of skill folders. */
export interface SkillRoot {
  /** Absolute path of the directory. */
  path: string;
  /** What it is, for listings and diagnostics: `project`, `user` or `config`. */
  kind: "project" | "user" | "config";
}

/**
 * The skill directories, best first; the `user` one (`userDir`, CODEMODE_SKILLS_DIR, else the user's
 * config folder) is where saves go. Duplicates keep their first place.
 */
export function skillRoots(
  options: { cwd?: string; env?: Record<string, string | undefined>; dirs?: string[]; userDir?: string } = {},
): SkillRoot[] {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const roots: SkillRoot[] = [
    { path: resolve(cwd, ".codemode", "skills"), kind: "project" },
    { path: options.userDir ? resolve(cwd, options.userDir) : userSkillsDir(env), kind: "user" },
    ...(options.dirs ?? []).map((dir) => ({ path: resolve(cwd, dir), kind: "config" as const })),
  ];
  return roots.filter((root, i) => roots.findIndex((r) => r.path === root.path) === i);
}

/** `$XDG_CONFIG_HOME/codemode/skills`, else `~/.config/codemode/skills`: the directory saves go to. */
export function userSkillsDir(env: Record<string, string | undefined> = process.env): string {
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config"), "codemode", "skills");
}

/**
 * Every entry under the skill directories with its kind, size and mtime, as one string: equal stamps mean
 * nothing was added, removed or rewritten. Synchronous on purpose: a few hundred lstat calls take about a
 * millisecond, awaited one by one they take far longer.
 */
export function directoryStamp(roots: readonly SkillRoot[]): string {
  const parts: string[] = [];
  const walk = (dir: string, depth: number): void => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of entries.sort()) {
      const path = join(dir, name);
      let info;
      try {
        info = lstatSync(path);
      } catch {
        continue;
      }
      parts.push(`${path}\0${info.isDirectory() ? "d" : "f"}\0${info.size}\0${info.mtimeMs}`);
      if (info.isDirectory() && depth < 8) walk(path, depth + 1);
    }
  };
  for (const root of roots) {
    parts.push(root.path);
    walk(root.path, 0);
  }
  return parts.join("\n");
}
