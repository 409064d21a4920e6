/**
 * Wires `codemode search` and `codemode tools` to settings, discovery and a lazily started pool.
 * @module
 */
import { type CliConfig, cliConfig } from "./_config.ts";
import { type CatalogDeps, runSearch } from "./search.ts";
import { runTools } from "./tools.ts";
import { existsSync } from "node:fs";
import type { Settings } from "../core/config/settings.ts";
import type { ToolDoc } from "../core/catalog/docs.ts";
import { skillRoots } from "../core/skills/sources.ts";

/** `codemode search <query...> [--limit N] [--server S] [--json]`. */
export async function search(
  query: string[],
  opts: { limit?: string; server?: string; json?: boolean },
): Promise<number> {
  const config = await cliConfig();
  try {
    return await runSearch(
      query.join(" "),
      { limit: Number(opts.limit ?? 10), server: opts.server, json: Boolean(opts.json) },
      catalogDeps(config),
    );
  } finally {
    await config.close();
  }
}

/** `codemode tools <server> [--json]`. */
export async function tools(server: string, opts: { json?: boolean }): Promise<number> {
  const config = await cliConfig();
  try {
    return await runTools(server, { json: Boolean(opts.json) }, catalogDeps(config));
  } finally {
    await config.close();
  }
}

/** What the catalog commands (search, tools, stubs) need, from this process's config. */
export function catalogDeps(config: CliConfig): CatalogDeps {
  const settings = config.settings;
  return {
    specs: config.discovery.servers,
    stateDir: settings.stateDir,
    lister: config.lister,
    skillLister: settings.skills === "off" ? undefined : config.skillLister,
    skillDocs: settings.skills === "off" ? undefined : () => localSkillDocs(settings),
    policy: config.policy,
  };
}

/** The local skills as search docs: none without a skill directory, else cached while they are unchanged. */
async function localSkillDocs(settings: Settings): Promise<ToolDoc[]> {
  const roots = skillRoots({ dirs: settings.skillDirs, userDir: settings.skillsDir });
  if (!roots.some((root) => existsSync(root.path))) return [];
  const { cachedSkillDocs } = await import("../core/skills/docs_cache.ts");
  return await cachedSkillDocs(roots, settings.stateDir);
}
