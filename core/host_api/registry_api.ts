/**
 * The registry methods sandbox code calls: `find_servers` searches the MCP registry (the host asks it;
 * the sandbox has no network), `add_server` adds one of its servers to the session, `remove_server`
 * stops one the session added. An add is checked before anyone is asked: adding must be on, the entry
 * must be one codemode runs (launch.ts), the add policy and the server policy must allow it, and sandbox
 * code may set only variables the entry declares and does not mark secret. Then, with
 * CODEMODE_ADD_SERVERS=ask, the user is asked through the approvals machinery, and only then does
 * anything start. A refused add starts nothing and asks nobody.
 * @module
 */
import { type AddPolicy, addPolicyOf, addTarget } from "../config/add_policy.ts";
import { keepServer } from "../config/kept_servers.ts";
import type { Policy } from "../config/policy.ts";
import type { Settings } from "../config/settings.ts";
import { RegistryClient } from "../registry/client.ts";
import { launchTools } from "../registry/launch.ts";
import type { AddedServers } from "./added_servers.ts";
import { pythonAlias } from "../python_alias.ts";
import { type LaunchPlan, launchPlan } from "../registry/launch.ts";
import { clean, type RegistryEntry } from "../registry/server_json.ts";
import { log } from "../observe/log.ts";
import { stats } from "../observe/stats.ts";
import { addServer, ms, record, type RegistryApiDeps, registryFailure } from "./add_server.ts";
import { RpcError } from "./rpc.ts";
import type { RpcMethod } from "./skills_api.ts";

export type { RegistryApiDeps } from "./add_server.ts";

/** Most results one find_servers call returns. */
const MAX_RESULTS = 50;
/** The registry side of a codemode process: the client (none when off), the add policy, the methods. */
export interface RegistrySide {
  client?: RegistryClient;
  addPolicy: AddPolicy;
  methods: Record<string, RpcMethod>;
}

/** The registry side that `settings` describe, adding to `servers` under `policy`. */
export function registrySide(
  settings: Settings,
  deps: { policy: Policy; servers: AddedServers; configured: () => string[] },
): RegistrySide {
  const client = settings.registryUrl === "off" ? undefined : new RegistryClient(settings.registryUrl);
  const addPolicy = addPolicyOf(settings);
  const source = settings.sources?.addServers;
  const methods = registryMethods({
    ...deps,
    registry: client,
    addPolicy,
    tools: launchTools(),
    askReason: source && !/^[A-Z][A-Z0-9_]*$/.test(source)
      ? `add_servers is "ask" in ${source}`
      : 'CODEMODE_ADD_SERVERS is "ask"',
    keep: (spec, origin) =>
      keepServer(spec, origin, settings.configFile ? { path: settings.configFile } : undefined),
  });
  return { ...(client ? { client } : {}), addPolicy, methods };
}

/** The registry RPC methods, by name. */
export function registryMethods(deps: RegistryApiDeps): Record<string, RpcMethod> {
  const registry = (): RegistryClient => {
    if (deps.registry) return deps.registry;
    throw new RpcError("PermissionError", "The MCP registry is off here (CODEMODE_REGISTRY_URL=off)");
  };
  return {
    async find_servers(params, context) {
      const query = typeof params.query === "string" ? params.query.trim() : "";
      if (!query || query.length > 200) {
        throw new RpcError("ValueError", "find_servers needs a query of 1 to 200 characters");
      }
      const limit = Math.max(1, Math.min(MAX_RESULTS, Math.trunc(Number(params.limit ?? 10)) || 10));
      const client = registry();
      const started = performance.now();
      const event = {
        kind: "registry.find" as const,
        session: context.session,
        registry: client.host,
        query,
      };
      try {
        const answer = await client.search(query, limit);
        stats.registryFind(true);
        record(context, {
          ...event,
          results: answer.entries.length,
          leftOut: answer.leftOut.length,
          ms: ms(started),
        });
        if (answer.leftOut.length) context.note?.(leftOutNote(client.host, answer.leftOut));
        return answer.entries.map((entry) => found(entry, deps));
      } catch (error) {
        stats.registryFind(false);
        const failure = registryFailure(error);
        record(context, { ...event, results: 0, leftOut: 0, ms: ms(started), error: failure.message });
        throw failure;
      }
    },
    async add_server(params, context) {
      return await addServer(deps, registry(), params, context);
    },
    async remove_server(params, context) {
      const alias = typeof params.alias === "string" ? params.alias : "";
      const servers = deps.servers.view(context.session);
      const server = servers?.get(alias);
      if (!server) {
        const configured = deps.configured().some((n) => n === alias || pythonAlias(n) === alias);
        throw new RpcError(
          configured ? "PermissionError" : "KeyError",
          configured
            ? `"${alias}" is a configured server; remove_server stops only servers this session added`
            : `This session added no server "${alias}"; added: ${
              servers?.added().map((s) => s.alias).join(", ") || "none"
            }`,
        );
      }
      await servers!.remove(alias);
      log.info("added server removed", { server: alias, name: server.name, session: context.session });
      record(context, { kind: "server.remove", session: context.session, alias, name: server.name });
      return { alias, name: server.name };
    },
  };
}

/** One find_servers result: what the entry is, how it would run, and whether it may be added. */
function found(entry: RegistryEntry, deps: RegistryApiDeps): Record<string, unknown> {
  const s = entry.server;
  const plan = launchPlan(entry, deps.tools);
  const runnable = "inputs" in plan;
  const verdict = !runnable
    ? { ok: false as const, reason: `codemode will not run it: ${plan.why}` }
    : firstRefusal([
      deps.addPolicy.enabled(),
      deps.addPolicy.allows({ name: s.name, target: addTarget(plan.type, plan.target) }),
    ]);
  return {
    name: s.name,
    ...(s.title ? { title: clean(s.title, 200) } : {}),
    description: clean(s.description ?? ""),
    version: clean(s.version, 64),
    run: runnable ? runOf(plan) : { type: plan.type ?? "unknown", ...plan.shown },
    env: runnable
      ? plan.inputs.filter((i) => i.kind === "env").map((i) => ({
        name: i.name,
        required: i.required,
        secret: i.secret,
      }))
      : [],
    allowed: verdict.ok,
    ...(verdict.ok ? {} : { why: verdict.reason }),
    ...(entry.status && entry.status !== "active" ? { status: entry.status } : {}),
  };
}

function runOf(plan: LaunchPlan): Record<string, unknown> {
  return plan.type === "remote"
    ? { type: "remote", url: plan.url }
    : { type: plan.type, command: plan.command };
}

function firstRefusal(verdicts: ({ ok: true } | { ok: false; reason: string })[]) {
  return verdicts.find((v) => !v.ok) ?? { ok: true as const };
}

function leftOutNote(host: string, leftOut: { name?: string; why: string }[]): string {
  const shown = leftOut.slice(0, 5).map((l) => `${l.name ?? "an unnamed entry"} (${l.why})`).join("; ");
  const more = leftOut.length > 5 ? `; and ${leftOut.length - 5} more` : "";
  return `find_servers left out ${leftOut.length} entr${
    leftOut.length === 1 ? "y" : "ies"
  } from ${host}: ${shown}${more}`;
}
