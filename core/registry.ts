/**
 * The plugin registry: the one place that knows which runtime, output and discovery plugins exist.
 * Core code asks it by name; only the entry points (mod.ts, cli/) register plugins.
 * @module
 */
import type { RuntimePlugin } from "./contracts/runtime.ts";
import type { OutputPlugin } from "./contracts/output.ts";
import type { DiscoveryPlugin } from "./contracts/discovery.ts";

/** Registered plugins by kind, in registration order. */
export class PluginRegistry {
  #runtimes = new Map<string, RuntimePlugin>();
  #outputs = new Map<string, OutputPlugin>();
  #discovery = new Map<string, DiscoveryPlugin>();

  /** Adds a runtime plugin; `auto` tries runtimes in registration order. */
  registerRuntime(plugin: RuntimePlugin): this {
    add(this.#runtimes, "runtime", plugin);
    return this;
  }

  /** Adds an output plugin. */
  registerOutput(plugin: OutputPlugin): this {
    add(this.#outputs, "output", plugin);
    return this;
  }

  /** Adds a discovery plugin; later plugins take precedence for duplicate server names. */
  registerDiscovery(plugin: DiscoveryPlugin): this {
    add(this.#discovery, "discovery", plugin);
    return this;
  }

  /** Runtime plugins in registration order. */
  runtimes(): RuntimePlugin[] {
    return [...this.#runtimes.values()];
  }

  /** Discovery plugins in precedence order (lowest first). */
  discoveryPlugins(): DiscoveryPlugin[] {
    return [...this.#discovery.values()];
  }

  /** The output plugin called `name`. */
  output(name: string): OutputPlugin {
    return get(this.#outputs, "output", name);
  }

  /** The runtime plugin called `name`. */
  runtime(name: string): RuntimePlugin {
    return get(this.#runtimes, "runtime", name);
  }
}

function add<T extends { name: string }>(map: Map<string, T>, kind: string, plugin: T): void {
  if (map.has(plugin.name)) throw new Error(`A ${kind} plugin named "${plugin.name}" is already registered`);
  map.set(plugin.name, plugin);
}

function get<T>(map: Map<string, T>, kind: string, name: string): T {
  const plugin = map.get(name);
  if (!plugin) {
    throw new Error(`Unknown ${kind} plugin "${name}"; registered: ${[...map.keys()].join(", ") || "none"}`);
  }
  return plugin;
}
