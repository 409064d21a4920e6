/**
 * The skills part of `codemode doctor`: whether skills are on (`CODEMODE_SKILLS`), each skill directory
 * with how many skills it gave, and every skill that failed to load.
 * @module
 */
import type { SkillStore } from "../skills/store.ts";
import type { SkillsMode } from "../skills/sources.ts";
import type { CheckStatus, Finding } from "./finding.ts";

/** One skill directory. */
export interface SkillDirCheck {
  path: string;
  kind: string;
  /** Skills loaded from it. */
  skills: number;
}

/** The skills section of the report. */
export interface SkillsCheck {
  mode: SkillsMode;
  status: CheckStatus;
  dirs: SkillDirCheck[];
  /** Skills that were skipped or shadowed, and why. */
  diagnostics: { path: string; message: string }[];
}

/** The skills check from the loaded store (none when skills are off). */
export function checkSkills(mode: SkillsMode, store: SkillStore | undefined): SkillsCheck {
  if (mode === "off" || !store) return { mode, status: "info", dirs: [], diagnostics: [] };
  const skills = store.skills();
  const diagnostics = store.diagnostics();
  return {
    mode,
    status: diagnostics.length ? "warn" : "ok",
    dirs: store.roots.map((root) => ({
      path: root.path,
      kind: root.kind,
      skills: skills.filter((s) => s.root.path === root.path).length,
    })),
    diagnostics,
  };
}

/** The skill diagnostics as doctor findings (warnings: the other skills still load). */
export function skillFindings(check: SkillsCheck | undefined): Finding[] {
  return (check?.diagnostics ?? []).map((d) => ({
    status: "warn" as const,
    subject: `skill ${d.path}`,
    message: d.message,
    fix: "Fix the skill (docs/skills.md says what a skill folder holds) or remove it",
  }));
}
