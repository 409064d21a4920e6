/**
 * codemode: one MCP tool, `run_python`, that reaches every MCP server you have configured from a
 * hardened sandbox. This module is the public API: the plugin contracts, the bundled plugins, and
 * `createCodemode()`, which wires the default plugins into a ready-to-serve codemode.
 *
 * ```ts
 * import { createCodemode } from "./mod.ts";
 * import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
 * const app = await createCodemode();
 * await (await app.mcpServer("stdio")).connect(new StdioServerTransport());
 * ```
 * @module
 */
import { Codemode, type CodemodeOptions } from "./core/app.ts";
import { PluginRegistry } from "./core/registry.ts";
import { loadSettings, type Settings } from "./core/config/settings.ts";
import { configureLog } from "./core/observe/log.ts";
import { podman } from "./plugins/runtime/podman.ts";
import { docker } from "./plugins/runtime/docker.ts";
import { nerdctl } from "./plugins/runtime/nerdctl.ts";
import { pyodide } from "./plugins/runtime/pyodide.ts";
import { compact } from "./plugins/output/compact.ts";
import { toon } from "./plugins/output/toon.ts";
import { json } from "./plugins/output/json.ts";
import { defaultDiscoveryPlugins } from "./plugins/discovery/mod.ts";
import { bootstrapCommand, bootstrapFrame, SANDBOX_RUNTIME } from "./sandbox/source.ts";
import { VERSION } from "./core/version.ts";

export type * from "./core/contracts/runtime.ts";
export type * from "./core/contracts/output.ts";
export type * from "./core/contracts/discovery.ts";
export { Codemode, type CodemodeOptions } from "./core/app.ts";
export { PluginRegistry } from "./core/registry.ts";
export { loadSettings, type Settings, SettingsError } from "./core/config/settings.ts";
export { compact, docker, json, nerdctl, podman, pyodide, toon };
export { VERSION };

/** The registry with every bundled plugin; `auto` tries runtimes in this order. */
export function defaultPlugins(
  settings?:
    & Pick<Settings, "stateDir" | "image">
    & Partial<Pick<Settings, "seccomp" | "isolation" | "gvisorPlatform" | "runsc">>,
): PluginRegistry {
  const oci = {
    image: settings?.image,
    seccomp: settings?.seccomp,
    isolation: settings?.isolation,
    gvisor: { runsc: settings?.runsc, platform: settings?.gvisorPlatform },
  };
  const registry = new PluginRegistry()
    .registerRuntime(podman(oci))
    .registerRuntime(docker(oci))
    .registerRuntime(nerdctl(oci))
    .registerRuntime(pyodide({ stateDir: settings?.stateDir, preload: SANDBOX_RUNTIME }))
    .registerOutput(compact())
    .registerOutput(toon())
    .registerOutput(json());
  for (const plugin of defaultDiscoveryPlugins()) registry.registerDiscovery(plugin);
  return registry;
}

/** Options of {@link createCodemode}; everything defaults to the environment and bundled plugins. */
export type CreateOptions = Partial<Omit<CodemodeOptions, "settings">> & { settings?: Settings };

/** Builds a configured codemode from the environment and the bundled plugins. */
export async function createCodemode(options: CreateOptions = {}): Promise<Codemode> {
  const settings = options.settings ?? loadSettings();
  configureLog({ level: settings.logLevel, file: settings.logFile });
  return await Codemode.create({
    plugins: options.plugins ?? defaultPlugins(settings),
    sandbox: options.sandbox ?? { command: bootstrapCommand(), bootstrapFrame },
    version: VERSION,
    ...options,
    settings,
  });
}
