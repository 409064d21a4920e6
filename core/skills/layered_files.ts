/**
 * Several skill directories as one `SkillFiles` store for the SDK's catalog, as the SDK advises for serving
 * several folders ("combine them behind one SkillFiles adapter"). Each top-level name belongs to the first
 * directory that has it; the same name further down is shadowed and reported. A directory that does not
 * exist holds no skills; one that cannot be listed is reported and skipped, so it never stops the others.
 * Below the top level every call goes to the owner's `nodeSkillFiles`, which refuses `..` and symlinks.
 * @module
 */
import type { SkillFileEntry, SkillFiles } from "@modelcontextprotocol/server/ext/skills";
import { nodeSkillFiles } from "@modelcontextprotocol/server/ext/skills/node";
import type { SkillRoot } from "./sources.ts";

/** A problem found while reading skills: the file or folder, and what is wrong. */
export interface SkillDiagnostic {
  path: string;
  message: string;
}

/** The combined store, and which directory owns each top-level name after the last walk. */
export interface LayeredSkillFiles extends SkillFiles {
  /** The directory that owns `name`, as of the last walk. */
  owner(name: string): SkillRoot | undefined;
  /** Diagnostics of the last walk (shadowed skills, unreadable directories). */
  diagnostics(): SkillDiagnostic[];
  /** Leaves these top-level names out of later walks (skills whose files cannot be read). */
  exclude(names: Iterable<string>): void;
}

/** One store over `roots` (best first). */
export function layeredSkillFiles(roots: readonly SkillRoot[]): LayeredSkillFiles {
  const stores = roots.map((root) => ({ root, files: nodeSkillFiles(root.path) }));
  let owners = new Map<string, (typeof stores)[number]>();
  let diagnostics: SkillDiagnostic[] = [];
  let excluded = new Set<string>();
  const storeOf = (path: string) => {
    const name = path.split("/")[0];
    const store = owners.get(name);
    if (!store) throw new Error(`no skill folder "${name}" in any skills directory`);
    return store.files;
  };
  return {
    async list(dir: string): Promise<SkillFileEntry[]> {
      if (dir !== "") return await storeOf(dir).list(dir);
      // A walk starts here: find the owner of every top-level name afresh.
      const nextOwners = new Map<string, (typeof stores)[number]>();
      const nextDiagnostics: SkillDiagnostic[] = [];
      const merged: SkillFileEntry[] = [];
      for (const store of stores) {
        let entries: SkillFileEntry[];
        try {
          entries = await store.files.list("");
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
            nextDiagnostics.push({
              path: store.root.path,
              message: `cannot be listed (${(error as Error).message}); its skills are skipped`,
            });
          }
          continue;
        }
        for (const entry of entries) {
          if (entry.name.startsWith(".") || excluded.has(entry.name)) continue;
          const first = nextOwners.get(entry.name);
          if (first) {
            if (entry.kind !== "file") {
              nextDiagnostics.push({
                path: `${store.root.path}/${entry.name}`,
                message: `shadowed by "${first.root.path}/${entry.name}", which comes first`,
              });
            }
            continue;
          }
          nextOwners.set(entry.name, store);
          merged.push(entry);
        }
      }
      owners = nextOwners;
      diagnostics = nextDiagnostics;
      return merged;
    },
    read(path: string): Promise<Uint8Array> {
      return storeOf(path).read(path);
    },
    owner(name: string): SkillRoot | undefined {
      return owners.get(name)?.root;
    },
    diagnostics(): SkillDiagnostic[] {
      return [...diagnostics];
    },
    exclude(names: Iterable<string>): void {
      excluded = new Set(names);
    },
  };
}
