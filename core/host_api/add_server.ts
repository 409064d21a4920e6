/**
 * `add_server`: resolves a registry entry, checks it and the policy before anyone is asked, asks the user
 * (CODEMODE_ADD_SERVERS=ask) or not (allow), then starts the server in the session and puts its tools in
 * search. A refused add starts nothing and asks nobody; values that only the user may give (secrets,
 * open arguments) come from the question's form, never from sandbox code.
 * @module
 */
import type { ServerSpec } from "../contracts/discovery.ts";
import { type AddPolicy, addTarget } from "../config/add_policy.ts";
import type { RegistryOrigin } from "../config/kept_servers.ts";
import type { Policy } from "../config/policy.ts";
import { pythonAlias } from "../python_alias.ts";
import { type RegistryClient, RegistryError } from "../registry/client.ts";
import {
  argv,
  commandLine,
  type LaunchPlan,
  launchPlan,
  type LaunchTools,
  valueProblem,
} from "../registry/launch.ts";
import { clean, type RegistryEntry } from "../registry/server_json.ts";
import { activity, type NewEvent } from "../observe/activity.ts";
import { log } from "../observe/log.ts";
import { stats } from "../observe/stats.ts";
import type { AddedServer, AddedServers } from "./added_servers.ts";
import { addRequest, answeredValues, askedInputs } from "./add_question.ts";
import { type RpcContext, RpcError } from "./rpc.ts";

/** What the registry methods need. */
export interface RegistryApiDeps {
  /** The registry; undefined when CODEMODE_REGISTRY_URL=off. */
  registry?: RegistryClient;
  addPolicy: AddPolicy;
  policy: Policy;
  servers: AddedServers;
  /** The configured servers' names (their aliases are taken too). */
  configured: () => string[];
  /** What runs packages here (uvx or not). */
  tools: LaunchTools;
  /** Why the user is asked, as the question says it (`CODEMODE_ADD_SERVERS is "ask"`). */
  askReason: string;
  /** Writes a server the user chose to keep to codemode's config file; returns the file's path. */
  keep?: (spec: ServerSpec, origin: RegistryOrigin) => string | Promise<string>;
}

/** Servers one session may have added at once: each is a process (or a connection) of its own. */
export const MAX_ADDED_PER_SESSION = 16;

/** Names a Python program cannot import as `mcp.servers.<alias>`, or codemode uses itself. */
const RESERVED = new Set(
  ("False None True and as assert async await break class continue def del elif else except finally for " +
    "from global if import in is lambda nonlocal not or pass raise return try while with yield skills")
    .split(" "),
);

/** Adds the server `params` names to the session of `context`; returns what sandbox code learns of it. */
export async function addServer(
  deps: RegistryApiDeps,
  client: RegistryClient,
  params: Record<string, unknown>,
  context: RpcContext,
): Promise<Record<string, unknown>> {
  const name = typeof params.name === "string" ? params.name.trim() : "";
  if (!name || name.length > 200) throw new RpcError("ValueError", "add_server needs a registry name");
  const version = params.version === undefined || params.version === null
    ? undefined
    : String(params.version);
  const event = {
    kind: "server.add" as const,
    session: context.session,
    name,
    ...(version ? { version } : {}),
  };
  const refuse = (reason: "off" | "policy" | "entry" | "secret", type: string, message: string): never => {
    stats.serverAdd({ refused: reason });
    record(context, { ...event, outcome: "refused", why: message });
    log.info("server add refused", { name, reason: message });
    throw new RpcError(type, message);
  };
  const enabled = deps.addPolicy.enabled();
  if (!enabled.ok) refuse("off", "PermissionError", enabled.reason);
  let entry: RegistryEntry;
  try {
    entry = await client.get(name, version);
  } catch (error) {
    const failure = registryFailure(error);
    record(context, { ...event, outcome: "refused", why: failure.message });
    throw failure;
  }
  const plan = launchPlan(entry, deps.tools);
  if (!("inputs" in plan)) refuse("entry", "ValueError", `codemode will not add "${name}": ${plan.why}`);
  const launch = plan as LaunchPlan;
  const allowed = deps.addPolicy.allows({ name, target: addTarget(launch.type, launch.target) });
  if (!allowed.ok) refuse("policy", "PermissionError", allowed.reason);
  const alias = aliasFor(deps, context.session, name, params.alias, refuse);
  const serverVerdict = deps.policy.allowsServer(alias);
  if (!serverVerdict.ok) refuse("policy", "PermissionError", serverVerdict.reason);
  const given = sandboxValues(launch, params.env, refuse);
  const asked = askedInputs(launch, given);
  const runs = commandLine(launch, given);
  const base = { ...event, version: launch.version, alias, runs };

  let values: Record<string, string> = {};
  let scope = "session";
  if (deps.addPolicy.mode === "allow") {
    const needed = asked.filter((a) => a.field.required).map((a) => a.input.name);
    if (needed.length) {
      refuse(
        "entry",
        "PermissionError",
        `"${name}" needs values only the user can give (${needed.join(", ")}), and with ` +
          'CODEMODE_ADD_SERVERS "allow" nobody is asked; the user can set CODEMODE_ADD_SERVERS=ask',
      );
    }
    stats.serverAdd({ answer: "allowed" });
  } else {
    const request = addRequest({
      name,
      version: launch.version,
      alias,
      registry: client.host,
      ...(entry.server.description ? { description: clean(entry.server.description, 500) } : {}),
      plan: launch,
      given,
      reason: deps.askReason,
    }, asked);
    const answer = context.approve ? await context.approve(request) : {
      approved: false,
      outcome: "unavailable" as const,
      message: `Adding "${name}" needs the user's approval, and nobody can be asked here`,
    };
    if (!answer.approved) {
      const outcome = answer.outcome === "cancelled" ? "declined" : answer.outcome;
      stats.serverAdd({ answer: outcome });
      record(context, { ...base, outcome: "declined", why: answer.message });
      throw new RpcError("PermissionError", answer.message ?? `Adding "${name}" was declined by the user`);
    }
    const checked = answeredValues(asked, answer.values);
    if ("problem" in checked) {
      stats.serverAdd({ answer: "declined" });
      const message = `Adding "${name}" did not go ahead: ${checked.problem}`;
      record(context, { ...base, outcome: "declined", why: message });
      throw new RpcError("PermissionError", message);
    }
    values = checked.values;
    scope = answer.scope ?? "session";
    stats.serverAdd({ answer: "approved" });
  }

  const spec = specOf(launch, alias, entry, { ...given, ...values }, client.baseUrl);
  const server: AddedServer = {
    alias,
    name,
    version: launch.version,
    registry: client.host,
    runs: commandLine(launch, { ...given, ...values }),
    spec,
    addedAt: new Date().toISOString(),
  };
  const servers = deps.servers.of(context.session);
  let tools;
  try {
    tools = await servers.add(server);
  } catch (error) {
    stats.serverAdd({ answer: "failed" });
    const message = `The MCP server "${name}" did not start: ${(error as Error)?.message ?? String(error)}`;
    record(context, { ...base, runs: server.runs, outcome: "failed", why: message });
    throw new RpcError("RuntimeError", message);
  }
  // A run that ended while the server started never learns of it: nothing may be left behind unseen.
  if (context.signal.aborted) {
    await servers.remove(alias);
    throw new RpcError("RuntimeError", `The run ended while "${name}" was starting; it was stopped again`);
  }
  let kept: string | undefined;
  if (scope === "keep" && deps.keep) {
    try {
      kept = await deps.keep(spec, { name, version: launch.version, url: client.baseUrl });
      servers.kept(alias, kept);
      context.note?.(
        `"${name}" was kept as "${alias}" in ${kept}: it is a configured server from the next start on`,
      );
    } catch (error) {
      context.note?.(`"${name}" could not be kept in codemode's config file: ${String(error).slice(0, 300)}`);
    }
  }
  log.info("server added", {
    name,
    alias,
    version: launch.version,
    tools: tools.length,
    session: context.session,
  });
  record(context, {
    ...base,
    runs: server.runs,
    outcome: "added",
    tools: tools.length,
    ...(kept ? { kept } : {}),
  });
  return {
    alias,
    name,
    version: launch.version,
    tools: tools.map((t) => ({
      name: t.name,
      alias: pythonAlias(t.name),
      description: clean(t.description ?? "", 300),
    })),
    ...(kept ? { kept } : {}),
  };
}

/** The alias asked for, or the registry name's last segment made a Python identifier, if it is free. */
function aliasFor(
  deps: RegistryApiDeps,
  session: string,
  name: string,
  wanted: unknown,
  refuse: (reason: "entry", type: string, message: string) => never,
): string {
  if (wanted !== undefined && wanted !== null && typeof wanted !== "string") {
    refuse("entry", "TypeError", "alias must be a string");
  }
  const alias = typeof wanted === "string" && wanted ? wanted : pythonAlias(name.split("/").pop() ?? name);
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(alias) || RESERVED.has(alias)) {
    refuse(
      "entry",
      "ValueError",
      `"${alias}" cannot be an alias: use a Python identifier of up to 64 characters`,
    );
  }
  const added = deps.servers.view(session);
  if ((added?.size ?? 0) >= MAX_ADDED_PER_SESSION) {
    refuse(
      "entry",
      "ValueError",
      `This session has added ${MAX_ADDED_PER_SESSION} servers, the most one session may; remove_server() one first`,
    );
  }
  const again = added?.added().find((s) => s.name === name);
  if (again) refuse("entry", "ValueError", `"${name}" is added already, as mcp_${again.alias}`);
  const taken = deps.configured().find((n) => n === alias || pythonAlias(n) === alias) ??
    added?.get(alias)?.name;
  if (taken) {
    refuse(
      "entry",
      "ValueError",
      `The alias "${alias}" is taken by the server "${taken}"; pass alias="..." to add_server`,
    );
  }
  return alias;
}

/** The variables sandbox code set: only ones the entry declares, never a secret or a fixed one. */
function sandboxValues(
  plan: LaunchPlan,
  env: unknown,
  refuse: (reason: "entry" | "secret", type: string, message: string) => never,
): Record<string, string> {
  if (env === undefined || env === null) return {};
  if (typeof env !== "object" || Array.isArray(env)) {
    refuse("entry", "TypeError", "env must be a dict of strings");
  }
  const given: Record<string, string> = {};
  for (const [key, value] of Object.entries(env as Record<string, unknown>)) {
    const input = plan.inputs.find((i) => i.kind === "env" && i.name === key);
    if (!input) {
      refuse("entry", "ValueError", `The entry declares no environment variable "${clean(key, 64)}"`);
    }
    if (input!.secret) {
      refuse(
        "secret",
        "PermissionError",
        `${key} is a secret: only the user can give its value (codemode asks for it), never sandbox code`,
      );
    }
    if (input!.fixed !== undefined) refuse("entry", "ValueError", `The entry fixes ${key}; it cannot be set`);
    if (typeof value !== "string") refuse("entry", "TypeError", `The value of ${key} must be a string`);
    const problem = valueProblem(input!, value as string);
    if (problem) refuse("entry", "ValueError", `The value of ${key} cannot be used: ${problem}`);
    given[key] = value as string;
  }
  return given;
}

/** How the added server starts: the argv (no shell) or the URL, and only the inputs the entry declares. */
function specOf(
  plan: LaunchPlan,
  alias: string,
  entry: RegistryEntry,
  values: Record<string, string>,
  registryUrl: string,
): ServerSpec {
  const valueOf = (kind: string) =>
    Object.fromEntries(
      plan.inputs.filter((i) => i.kind === kind).flatMap((i) => {
        const v = i.fixed ?? values[i.name] ?? i.default;
        return v === undefined || v === "" ? [] : [[i.name, v]];
      }),
    );
  const source = { plugin: "registry", file: registryUrl, key: `${entry.server.name}@${plan.version}` };
  const description = entry.server.description ? clean(entry.server.description, 500) : undefined;
  if (plan.type === "remote") {
    return { name: alias, transport: "http", url: plan.url, headers: valueOf("header"), source, description };
  }
  const [command, ...args] = argv(plan, values);
  return { name: alias, transport: "stdio", command, args, env: valueOf("env"), source, description };
}

export /** A registry failure as the exception sandbox code gets: every one names the registry's host. */
function registryFailure(error: unknown): RpcError {
  if (!(error instanceof RegistryError)) {
    return new RpcError("ConnectionError", `The MCP registry failed: ${String(error).slice(0, 300)}`);
  }
  const type = { timeout: "TimeoutError", unreachable: "ConnectionError", http: "ConnectionError" }[
    error.kind as string
  ] ?? (error.kind === "not_found" ? "KeyError" : "ValueError");
  return new RpcError(type, error.message);
}

export function record(context: RpcContext, event: NewEvent): void {
  if (!activity.enabled) return;
  activity.record({ ...event, ...(context.requestId ? { run: context.requestId } : {}) } as NewEvent);
}

export function ms(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
