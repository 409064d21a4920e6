/**
 * What the light CLI commands (search, tools, servers) share: settings and discovered servers, with
 * the upstream pool loaded only when a server really has to be started.
 * @module
 */
import { loadSettings, type Settings } from "../core/config/settings.ts";
import { configureLog } from "../core/observe/log.ts";
import {
  defaultDiscoveryContext,
  discoverServers,
  type Discovery,
  ownServers,
} from "../core/config/discovery.ts";
import { defaultDiscoveryPlugins } from "../plugins/discovery/mod.ts";
import type { ServerSpec } from "../core/contracts/discovery.ts";
import type { UpstreamPool } from "../core/upstream/pool.ts";
import { type Policy, policyOf } from "../core/config/policy.ts";
import { claimStateDir } from "../core/config/state_stamp.ts";
import { VERSION } from "../core/version.ts";
import type { ToolLister } from "../core/catalog/catalog.ts";

/** Settings, discovered servers and a lazy tool lister. */
export interface CliConfig {
  settings: Settings;
  discovery: Discovery;
  /** What the policy lets sandbox code reach; the CLI shows and starts no more than that. */
  policy: Policy;
  lister: ToolLister;
  /** Lists the skills a server publishes (skills extension), starting it like `lister`. */
  skillLister: (spec: ServerSpec) => Promise<{ name: string; description: string }[]>;
  close(): Promise<void>;
}

/** Loads settings and discovers servers; starts nothing. */
export async function cliConfig(): Promise<CliConfig> {
  const settings = loadSettings();
  configureLog({ level: settings.logLevel, file: settings.logFile });
  // Their caches, logins and the activity they read live there: a newer codemode's directory is refused.
  await claimStateDir(settings.stateDir, VERSION);
  const discovery = await discoverServers(defaultDiscoveryContext(), defaultDiscoveryPlugins(), {
    allowSelf: settings.allowSelf,
    own: ownServers(settings),
  });
  const policy = policyOf(settings);
  let pool: Promise<UpstreamPool> | undefined;
  // A refused server is never started, not even to index its tools.
  const getPool = () =>
    pool ??= Promise.all([import("../core/upstream/pool.ts"), import("../core/auth/clients.ts")]).then(
      ([{ UpstreamPool }, { OAuthClients }]) => {
        const oauth = new OAuthClients(settings.stateDir, settings.oauthDir);
        return new UpstreamPool(discovery.servers.filter((s) => policy.allowsServer(s.name).ok), {
          auth: (spec) => oauth.forServer(spec),
        });
      },
    );
  return {
    settings,
    discovery,
    policy,
    lister: async (spec) => (await getPool()).listing(spec.name),
    skillLister: async (spec) => (await getPool()).listSkills(spec.name),
    close: async () => {
      if (pool) await (await pool).close();
    },
  };
}
