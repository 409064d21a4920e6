/**
 * Skill names: the skills extension's rule (lowercase letters and digits in words joined by single hyphens,
 * at most 64 characters, equal to the folder's name) is checked by the SDK; here are the two spellings.
 * Python imports a skill with its hyphens turned into underscores, as server aliases are, so
 * `todo_counter` and `todo-counter` name the same skill.
 * @module
 */

/** The folder name a user or sandbox spelling means: underscores become hyphens. */
export function skillFolderName(name: string): string {
  return name.replaceAll("_", "-");
}

/** The module name Python imports a skill as, under `skills.`: hyphens become underscores. */
export function moduleName(name: string): string {
  return name.replaceAll("-", "_");
}

/** The file of a skill's code. */
export const CODE_FILE = "skill.py";
/** The file of a skill's documentation and frontmatter. */
export const MANIFEST_FILE = "SKILL.md";
