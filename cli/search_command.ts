/**
 * Wires `codemode search` and `codemode tools` to settings, discovery and a lazily started pool.
 * @module
 */
import { type CliConfig, cliConfig } from "./_config.ts";
import { type CatalogDeps, runSearch } from "./search.ts";
import { runTools } from "./tools.ts";

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

function catalogDeps(config: CliConfig): CatalogDeps {
  return {
    specs: config.discovery.servers,
    stateDir: config.settings.stateDir,
    lister: config.lister,
    policy: config.policy,
  };
}
