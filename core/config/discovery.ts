/**
 * Server discovery: asks each discovery plugin for its files, expands variables, drops entries that would
 * launch codemode itself, and settles duplicate names by precedence (see docs/discovery.md).
 * @module
 */

import { homedir } from "node:os";
import process from "node:process";
import type {
  Diagnostic,
  DiscoveryContext,
  DiscoveryPlugin,
  DiscoveryResult,
  Provenance,
  ServerSpec,
} from "../contracts/discovery.ts";
import { expandServer } from "./expand_vars.ts";
import { KEPT_SOURCE } from "./kept_servers.ts";
import type { Settings } from "./settings.ts";

/** A configured server codemode will not use, with the reason to show the user. */
export interface SkippedServer {
  name: string;
  source: Provenance;
  reason: string;
}

/** One config file that was read, and how many server entries it defined. */
export interface DiscoveredFile {
  plugin: string;
  path: string;
  servers: number;
}

/** Everything discovery found: usable servers (by name), skipped ones, problems, and the files read. */
export interface Discovery {
  servers: ServerSpec[];
  skipped: SkippedServer[];
  diagnostics: Diagnostic[];
  files: DiscoveredFile[];
}

/** Options for {@link discoverServers}. */
export interface DiscoverOptions {
  /** Keep entries that would launch codemode itself (normally skipped to avoid recursion). */
  allowSelf?: boolean;
  /**
   * Servers from codemode's own config file (kept from a registry), and what is wrong with its entries;
   * they rank after every plugin's user-scope servers.
   */
  own?: { file?: string; servers: ServerSpec[]; problems: string[] };
}

/** Precedence tier of each scope; a higher tier wins. Scopes not listed rank as "user". */
export const SCOPE_RANK: Readonly<Record<string, number>> = { user: 0, project: 1, workspace: 1, local: 2 };

/** The servers kept in codemode's own config file (settings read them), as `own` for discoverServers. */
export function ownServers(
  settings: Pick<Settings, "configFile" | "keptServers" | "keptServerProblems">,
): NonNullable<DiscoverOptions["own"]> {
  return { file: settings.configFile, servers: settings.keptServers, problems: settings.keptServerProblems };
}

/** The machine's own discovery context: home directory, working directory, platform, environment. */
export function defaultDiscoveryContext(): DiscoveryContext {
  return { home: homedir(), cwd: process.cwd(), platform: process.platform, env: process.env };
}

// A release binary keeps its download name: codemode-0.1.0-linux-x64 (scripts/release.sh).
const SELF_BINARY =
  /^codemode(-\d[\w.+-]*-(linux|darwin|windows)-(x64|arm64))?(\.(exe|cmd|bat|ps1|js|mjs|ts))?$/i;
// A package name, or the tarball `npm pack` makes (`npx -y ./codemode-0.1.0.tgz serve`).
const SELF_PACKAGE = /^(npm:|jsr:)?(@codemode\/)?codemode(@.*)?$|(^|[\\/])codemode-\d[^\\/]*\.tgz$/i;
const LAUNCHER = /^(npx|bunx|pnpx|npm|pnpm|yarn|bun|deno|node)(\.(exe|cmd))?$/i;
const SELF_COMMAND_LINE = /(^|[\s/\\"'])codemode(\.exe)?\s+serve\b/i;
const ENTRY_SCRIPT = /^(cli|mod|main)\.(ts|js)$/;

function baseName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/** Why a stdio server would launch codemode itself, or undefined when it would not. */
export function selfReference(spec: ServerSpec): string | undefined {
  if (spec.transport !== "stdio" || !spec.command) return undefined;
  const args = spec.args ?? [];
  const line = [spec.command, ...args].join(" ");
  const reason = `would launch codemode itself ("${line}")`;
  if (SELF_BINARY.test(baseName(spec.command))) return reason;
  if (LAUNCHER.test(baseName(spec.command))) {
    // `npx codemode`, `bunx @codemode/codemode@1`, `deno task codemode`, `deno run npm:codemode`.
    if (args.some((arg) => SELF_PACKAGE.test(arg))) return reason;
    // `deno run -A ~/src/codemode/cli.ts serve`: an entry script inside a codemode checkout.
    const inCheckout = (arg: string) =>
      ENTRY_SCRIPT.test(baseName(arg)) &&
      arg.split(/[\\/]/).slice(0, -1).some((dir) => /codemode/i.test(dir));
    if (args.includes("serve") && args.some(inCheckout)) return reason;
  }
  // Shell wrappers: `sh -c "exec codemode serve"`, `cmd /c codemode serve`.
  if (args.some((arg) => SELF_COMMAND_LINE.test(arg))) return reason;
  return undefined;
}

async function readAll(
  plugin: DiscoveryPlugin,
  context: DiscoveryContext,
): Promise<{ reads: { path: string; result: DiscoveryResult }[]; problem?: Diagnostic }> {
  const failure = (file: string, error: unknown): Diagnostic => ({
    severity: "error",
    file,
    message: `Discovery plugin "${plugin.name}" failed on "${file}": ${
      error instanceof Error ? error.message : String(error)
    }; report this as a bug`,
  });
  let paths: string[];
  try {
    paths = await plugin.candidates(context);
  } catch (error) {
    return { reads: [], problem: failure(plugin.name, error) };
  }
  const reads = await Promise.all(paths.map(async (path) => {
    try {
      return { path, result: await plugin.read(path, context) };
    } catch (error) {
      return { path, result: { servers: [], diagnostics: [failure(path, error)] } };
    }
  }));
  return { reads };
}

/**
 * Discovers the servers configured for the context by the given plugins (lowest precedence first).
 * Never throws for a bad file or entry: those become diagnostics and the rest still loads.
 */
export async function discoverServers(
  context: DiscoveryContext,
  plugins: DiscoveryPlugin[],
  options: DiscoverOptions = {},
): Promise<Discovery> {
  const discovery: Discovery = { servers: [], skipped: [], diagnostics: [], files: [] };
  const usable: ServerSpec[] = [];
  const perPlugin = await Promise.all(plugins.map((plugin) => readAll(plugin, context)));
  const own = options.own;
  if (own?.file && (own.servers.length || own.problems.length)) {
    perPlugin.push({
      reads: [{
        path: own.file,
        result: {
          servers: own.servers,
          diagnostics: own.problems.map((message) => ({ severity: "error", file: own.file!, message })),
        },
      }],
    });
  }
  perPlugin.forEach(({ reads, problem }, index) => {
    if (problem) discovery.diagnostics.push(problem);
    for (const { path, result } of reads) {
      discovery.diagnostics.push(...result.diagnostics);
      discovery.files.push({
        plugin: plugins[index]?.name ?? KEPT_SOURCE,
        path,
        servers: result.servers.length,
      });
      for (const raw of result.servers) {
        const { spec, diagnostics, unusable } = expandServer(raw, context);
        discovery.diagnostics.push(...diagnostics);
        const reason = unusable ?? (options.allowSelf ? undefined : selfReference(spec));
        if (reason) discovery.skipped.push({ name: spec.name, source: spec.source, reason });
        else usable.push(spec);
      }
    }
  });

  // Stable sort: within a scope tier, plugin order, then file order, then entry order decide.
  const rank = (spec: ServerSpec) => SCOPE_RANK[spec.source.scope ?? "user"] ?? 0;
  const winners = new Map<string, ServerSpec>();
  for (const spec of usable.sort((a, b) => rank(a) - rank(b))) {
    const loser = winners.get(spec.name);
    winners.set(spec.name, loser ? { ...spec, shadowed: [loser.source, ...loser.shadowed ?? []] } : spec);
  }
  discovery.servers = [...winners.values()].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  return discovery;
}
