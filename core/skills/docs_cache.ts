/**
 * The local skills' search docs for one-shot commands (`codemode search`), cached in the state directory
 * under a stamp of the skill directories (every entry's name, size and mtime): while nothing changed, a
 * search neither loads the SDK's skills catalog nor reads and hashes every skill.
 * @module
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ToolDoc } from "../catalog/docs.ts";
import { directoryStamp, type SkillRoot } from "./sources.ts";

const VERSION = 1;

/** The docs of the skills in `roots`: from the cache when the directories are unchanged, else loaded. */
export async function cachedSkillDocs(roots: SkillRoot[], stateDir: string): Promise<ToolDoc[]> {
  const stamp = createHash("sha256").update(directoryStamp(roots)).digest("hex");
  const file = join(stateDir, "skill-docs.json");
  try {
    const cached = JSON.parse(await readFile(file, "utf8"));
    if (cached?.version === VERSION && cached.stamp === stamp && Array.isArray(cached.docs)) {
      return cached.docs;
    }
  } catch { /* missing or corrupt: load and rewrite it */ }
  const { SkillStore } = await import("./store.ts");
  const docs = (await SkillStore.open({ roots, mode: "ro" })).docs();
  const temp = `${file}.${randomUUID()}.tmp`;
  try {
    await mkdir(stateDir, { recursive: true });
    await writeFile(temp, JSON.stringify({ version: VERSION, stamp, docs }));
    await rename(temp, file);
  } catch {
    await rm(temp, { force: true });
  }
  return docs;
}
