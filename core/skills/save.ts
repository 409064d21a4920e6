/**
 * Writing and removing skills. A save builds the skill in memory, lets the SDK check it (`skillEntry`:
 * the name rule, the name matching its folder, frontmatter that reads back), caps it at 256 KiB, then
 * writes it into the user's skills directory under a hidden temporary name and renames it into place, so
 * a refused or failed save writes nothing and readers never see half a skill.
 * @module
 */
import { skillEntry } from "@modelcontextprotocol/server/ext/skills";
import { randomUUID } from "node:crypto";
import { lstat, mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CODE_FILE, type LocalSkill, MANIFEST_FILE, type SkillStore } from "./store.ts";
import { moduleName, skillFolderName } from "./names.ts";

/** The cap on a skill saved from the sandbox (SKILL.md and skill.py together), well under `SKILL_LIMITS`. */
export const SAVE_LIMIT_BYTES = 256 * 1024;

/** One public function of a skill's code, as the sandbox read it (for the generated SKILL.md). */
export interface SkillFunction {
  name: string;
  /** `(a, b=1) -> int` */
  signature: string;
  doc?: string;
  async?: boolean;
}

/** What the sandbox asks to save. */
export interface SaveRequest {
  name: string;
  code: string;
  description: string;
  overwrite?: boolean;
  /** Servers the code calls, for the frontmatter. */
  servers?: string[];
  functions?: SkillFunction[];
}

/** Why a save or removal was refused; `pythonType` is the exception sandbox code gets. */
export class SkillWriteError extends Error {
  constructor(readonly pythonType: "ValueError" | "FileExistsError" | "PermissionError", message: string) {
    super(message);
    this.name = "SkillWriteError";
  }
}

/** What a save wrote. */
export interface SavedSkill {
  name: string;
  module: string;
  uri: string;
  replaced: boolean;
}

/** Validates and writes a skill into the user's skills directory; nothing is written when it is refused. */
export async function saveSkill(store: SkillStore, request: SaveRequest): Promise<SavedSkill> {
  if (store.mode !== "rw") {
    throw new SkillWriteError("PermissionError", "Saving skills is turned off here (CODEMODE_SKILLS=ro)");
  }
  const name = skillFolderName(String(request.name ?? ""));
  const description = checkDescription(request.description);
  await checkName(name);
  if (typeof request.code !== "string" || !request.code.trim()) {
    throw new SkillWriteError("ValueError", `The code of skill "${name}" is empty`);
  }
  return await store.exclusive(async () => {
    await store.reload();
    const existing = store.find(name);
    const root = store.userRoot;
    if (
      existing && existing.root.path !== root.path && store.roots.indexOf(existing.root) <
        store.roots.indexOf(root)
    ) {
      throw new SkillWriteError(
        "FileExistsError",
        `A skill named "${name}" in the ${existing.root.kind} skills directory takes precedence over ` +
          "saved skills, so a saved one would never load; choose another name",
      );
    }
    const target = join(root.path, name);
    const present = await lstat(target).then(() => true, () => false);
    if ((existing || present) && !request.overwrite) {
      throw new SkillWriteError(
        "FileExistsError",
        `A skill named "${name}" already exists; pass overwrite=True to replace it`,
      );
    }
    const previous = existing?.root.path === root.path ? existing : undefined;
    const manifest = manifestText(name, description, request, previous);
    const files = { [MANIFEST_FILE]: manifest, [CODE_FILE]: request.code };
    const size = new TextEncoder().encode(manifest + request.code).byteLength;
    if (size > SAVE_LIMIT_BYTES) {
      throw new SkillWriteError(
        "ValueError",
        `Skill "${name}" is ${kib(size)} KiB, over the ${kib(SAVE_LIMIT_BYTES)} KiB cap for skills ` +
          "saved from the sandbox; split it, or keep large data out of the code",
      );
    }
    const entry = await skillEntry(name, files).catch((error) => {
      throw new SkillWriteError("ValueError", `Skill "${name}" cannot be saved: ${problemsOf(error)}`);
    });
    if (entry.frontmatter.description !== description) {
      throw new SkillWriteError(
        "ValueError",
        `The description of skill "${name}" cannot be stored as written`,
      );
    }
    await writeSkill(root.path, name, files, present);
    await store.reload();
    return { name, module: moduleName(name), uri: entry.uri, replaced: present };
  });
}

/** Removes a loaded skill's folder, wherever it lives. */
export async function removeSkill(store: SkillStore, name: string): Promise<LocalSkill> {
  if (store.mode !== "rw") {
    throw new SkillWriteError("PermissionError", "Removing skills is turned off here (CODEMODE_SKILLS=ro)");
  }
  return await store.exclusive(async () => {
    await store.reload();
    const skill = store.find(name);
    if (!skill) {
      throw new SkillWriteError(
        "ValueError",
        `No skill named "${name}" is loaded; codemode skills list shows them (a broken skill folder is ` +
          "removed by hand)",
      );
    }
    // Moved aside first, so a reader never sees a half-deleted skill; a symlink is removed, never followed.
    const aside = join(skill.root.path, `.removing-${randomUUID()}`);
    await rename(join(skill.root.path, skill.name), aside);
    await rm(aside, { recursive: true, force: true });
    await store.reload();
    return skill;
  });
}

/** Throws a ValueError-type refusal unless `name` passes the skills extension's name rule. */
async function checkName(name: string): Promise<void> {
  const probe = `---\nname: ${JSON.stringify(name)}\ndescription: "probe"\n---\n`;
  try {
    await skillEntry(name, { [MANIFEST_FILE]: probe });
  } catch (error) {
    throw new SkillWriteError(
      "ValueError",
      `Invalid skill name ${JSON.stringify(name)}: use lowercase letters and digits in words joined by ` +
        `single hyphens (or underscores), at most 64 characters, no path (${problemsOf(error)})`,
    );
  }
}

function checkDescription(raw: unknown): string {
  if (typeof raw !== "string" || !raw.trim()) {
    throw new SkillWriteError("ValueError", "A skill needs a description: one line saying what it does");
  }
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/.test(raw)) {
    throw new SkillWriteError("ValueError", "The skill's description contains control characters");
  }
  return raw.replace(/\s+/g, " ").trim();
}

/** SKILL.md: frontmatter (JSON-quoted scalars are valid YAML), then how to use the skill and its functions. */
function manifestText(
  name: string,
  description: string,
  request: SaveRequest,
  previous: LocalSkill | undefined,
): string {
  const now = new Date().toISOString();
  const before = previous?.frontmatter ?? {};
  const version = Number.isInteger(before.version) ? (before.version as number) + 1 : 1;
  const servers = [...new Set((request.servers ?? []).filter((s) => typeof s === "string" && s))].sort();
  // The sandbox's description of its functions is text for the body, nothing more: identifiers only, clipped.
  const functions = (request.functions ?? [])
    .filter((f) => f && typeof f.name === "string" && /^[A-Za-z_][A-Za-z0-9_]{0,99}$/.test(f.name))
    .slice(0, 100);
  const module = moduleName(name);
  const lines = [
    "---",
    `name: ${JSON.stringify(name)}`,
    `description: ${JSON.stringify(description)}`,
    ...(servers.length ? [`servers: [${servers.map((s) => JSON.stringify(s)).join(", ")}]`] : []),
    `version: ${version}`,
    `created: ${JSON.stringify(typeof before.created === "string" ? before.created : now)}`,
    `updated: ${JSON.stringify(now)}`,
    "---",
    `# ${name}`,
    "",
    description,
    "",
    "## Use",
    "",
    "```python",
    `from skills import ${module}`,
    ...(functions.length
      ? [`${functions[0].async ? "await " : ""}${module}.${functions[0].name}(...)`]
      : [`help(${module})`]),
    "```",
    "",
  ];
  if (functions.length) {
    lines.push("## Functions", "");
    for (const f of functions) {
      const doc = String(f.doc ?? "").split("\n")[0].trim().slice(0, 200);
      const signature = `${f.async ? "async " : ""}${f.name}${String(f.signature ?? "()").slice(0, 300)}`
        .replace(
          /\s+/g,
          " ",
        );
      lines.push(`- \`${signature}\`${doc ? `: ${doc}` : ""}`);
    }
    lines.push("");
  }
  return lines.join("\n");
}

async function writeSkill(
  root: string,
  name: string,
  files: Record<string, string>,
  replace: boolean,
): Promise<void> {
  await mkdir(root, { recursive: true });
  // Hidden names: the catalog skips them, so a half-written skill is never loaded.
  const temp = await mkdtemp(join(root, ".saving-"));
  try {
    for (const [file, text] of Object.entries(files)) await writeFile(join(temp, file), text, { flag: "wx" });
    const target = join(root, name);
    // Another codemode sharing the directory (a fleet's node) may save the same name meanwhile: the old
    // folder may be gone already, and a new one may have taken the name.
    const aside = join(root, `.replaced-${randomUUID()}`);
    const setAside = replace && await rename(target, aside).then(() => true, (error) => {
      if (errorCode(error) !== "ENOENT") throw error;
      return false;
    });
    try {
      await rename(temp, target);
    } catch (error) {
      if (setAside) await rename(aside, target).catch(() => {});
      if (errorCode(error) === "ENOTEMPTY" || errorCode(error) === "EEXIST") {
        throw new SkillWriteError(
          "FileExistsError",
          `A skill named "${name}" was saved meanwhile by another codemode sharing the skills directory; ` +
            (replace ? "try again to replace it" : "pass overwrite=True to replace it"),
        );
      }
      throw error;
    }
    if (setAside) await rm(aside, { recursive: true, force: true });
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    throw error;
  }
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

function problemsOf(error: unknown): string {
  const problems = (error as { problems?: { message: string }[] })?.problems;
  return problems?.length
    ? problems.map((p) => p.message).join("; ")
    : (error as Error)?.message ?? String(error);
}

function kib(bytes: number): string {
  return (bytes / 1024).toFixed(bytes % 1024 ? 1 : 0);
}
