/**
 * What sandbox code can ask of the host: tool calls, server and tool docs, search. Each RPC method the
 * Python `mcp` package uses is served here. Server secrets (env, headers, args, urls) never cross.
 * The policy applies here: refused servers and tools are left out of every listing and search, and
 * naming one raises PermissionError saying which rule refused it. Calls the policy says the user must
 * approve wait for the run's approver; calls a dry run marks are made only when the tool's own
 * annotations say it is read-only, and recorded otherwise.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import type { ToolReply } from "../upstream/lean_calls.ts";
import type { ServerSpec } from "../contracts/discovery.ts";
import { pythonAlias } from "../python_alias.ts";
import { isReadOnly, Policy, type Verdict } from "../config/policy.ts";
import { redact, secretsOf } from "../upstream/redact.ts";
import { type RpcContext, RpcError, type RpcHandler } from "./rpc.ts";
import { summarizeArguments } from "./approvals.ts";
import { recordToolCall, type ToolCallRecord } from "./tool_call_activity.ts";
import { type ToolDoc, toolDoc, toolFull, toolSummary } from "../catalog/docs.ts";
import type { SearchHit } from "../catalog/index.ts";
import { type RpcMethod, skillMethods, type SkillsApiDeps } from "./skills_api.ts";

/** What the skill methods need beyond what the API already has (see skills_api.ts). */
export type SkillsOptions = Omit<SkillsApiDeps, "policy" | "resolveServer" | "allowedServers">;

/** The upstream side: the pool of MCP client connections. */
export interface ToolCaller {
  names(): string[];
  spec(name: string): ServerSpec | undefined;
  listTools(name: string): Promise<Tool[]>;
  /** The raw result, and the server's response text when the pool kept it (see UpstreamPool). */
  callToolReply(
    name: string,
    tool: string,
    args: Record<string, unknown>,
    options?: { signal?: AbortSignal },
  ): Promise<ToolReply>;
}

/** The doc side: search over every configured server (cached), and docs already indexed. */
export interface DocSearch {
  search(query: string, options: { limit?: number; server?: string }): SearchHit[] | Promise<SearchHit[]>;
  /** Indexed docs of one server: search hits are checked against the policy with their annotations. */
  docs(server: string): ToolDoc[];
}

/** How a tool's reply travels to Python (`toolResultForPython`; tests answer with plain values). */
export type ResultCodec = (reply: ToolReply, raw: boolean) => unknown;

/**
 * Builds the RPC handler sandbox sessions use; `policy` decides what sandbox code may reach. Without
 * `skills` the skill methods answer that skills are off.
 */
export function sandboxApi(
  pool: ToolCaller,
  docs: DocSearch,
  codec: ResultCodec,
  policy: Policy = new Policy(),
  skills?: SkillsOptions,
): RpcHandler {
  // One AbortSignal per run, so counting by signal counts per run and forgets finished runs by itself.
  const callsMade = new WeakMap<AbortSignal, number>();
  const allowedServers = () => pool.names().filter((n) => policy.allowsServer(n).ok);
  const server = (params: Record<string, unknown>, key = "server"): string => {
    const name = params[key];
    if (typeof name !== "string" || !name) throw new RpcError("ValueError", `"${key}" must be a server name`);
    const resolved = resolveServer(pool, name);
    enforce(policy.allowsServer(resolved ?? name));
    if (!resolved) {
      throw new RpcError(
        "KeyError",
        `Unknown server "${name}"; configured: ${allowedServers().join(", ") || "none"}`,
      );
    }
    return resolved;
  };
  const allowed = (d: ToolDoc) => policy.allowsTool(d.server, d.tool, d.annotations).ok;
  // Configured secrets of every server, kept out of the questions people read (specs never change).
  let secrets: string[] | undefined;
  const allSecrets = () =>
    secrets ??= [...new Set(pool.names().flatMap((n) => secretsOf(pool.spec(n) ?? {})))]
      .sort((a, b) => b.length - a.length);
  /** Waits for the user's approval of a call the policy asks about; raises PermissionError when refused. */
  const approved = async (
    context: RpcContext,
    server: string,
    tool: string,
    args: object,
    reason: string,
  ) => {
    const request = {
      server,
      tool,
      reason,
      summary: summarizeArguments(args as Record<string, unknown>, allSecrets()),
    };
    const answer = context.approve ? await context.approve(request) : {
      approved: false,
      message:
        `Call to "${server}/${tool}" needs the user's approval (${reason}), and nobody can be asked here`,
    };
    if (!answer.approved) throw new RpcError("PermissionError", answer.message ?? "Declined by the user");
    if (answer.message) context.note?.(answer.message);
  };
  const toolDocs = async (name: string): Promise<ToolDoc[]> =>
    (await pool.listTools(name)).map((t) => toolDoc(name, t)).filter(allowed);

  const methods: Record<string, (params: Record<string, unknown>, context: RpcContext) => Promise<unknown>> =
    {
      async call_tool(params, context) {
        const { signal, requestId } = context;
        const args = params.arguments ?? {};
        const call: ToolCallRecord = {
          run: requestId,
          server: String(params.server ?? ""),
          tool: String(params.tool ?? ""),
          args,
          started: performance.now(),
        };
        try {
          const name = call.server = server(params);
          call.spec = pool.spec(name);
          const tool = await resolveTool(pool, policy, name, call.tool);
          call.tool = tool.name;
          if (typeof args !== "object" || args === null || Array.isArray(args)) {
            throw new RpcError("TypeError", "Tool arguments must be keyword arguments (a dict)");
          }
          const made = callsMade.get(signal) ?? 0;
          enforce(policy.allowsCall(made));
          callsMade.set(signal, made + 1);
          // The sandbox only asks for a dry call; whether the tool merely reads is the server's word, not its.
          // A planned call is not made, so it is no tool call in the activity record either.
          if (params.dry_run === true && !isReadOnly(tool.annotations)) {
            context.plan?.({ server: name, tool: tool.name, arguments: args as Record<string, unknown> });
            return null;
          }
          const reason = policy.approvalReason(name, tool.name, tool.annotations);
          if (reason !== undefined) await approved(context, name, tool.name, args, reason);
          const reply = await pool.callToolReply(name, tool.name, args as Record<string, unknown>, {
            signal,
          });
          recordToolCall(call, { result: reply.result });
          return codec(reply, params.raw === true);
        } catch (error) {
          recordToolCall(call, { error });
          throw error;
        }
      },
      list_servers() {
        return Promise.resolve(allowedServers().map((name) => publicServer(name, pool.spec(name))));
      },
      // Tools in full (with input schemas): the bridge's list_tools and server metadata carry them.
      async describe_server(params) {
        const name = server(params, "name");
        return { ...publicServer(name, pool.spec(name)), tools: (await toolDocs(name)).map(toolFull) };
      },
      async list_tools(params) {
        return (await toolDocs(server(params))).map(toolFull);
      },
      async query_tool_docs(params) {
        const name = server(params);
        const detail = params.detail === "full" ? "full" : "summary";
        let found = await toolDocs(name);
        if (typeof params.tool === "string" && params.tool) {
          const wanted = params.tool;
          found = found.filter((d) => d.tool === wanted || pythonAlias(d.tool) === wanted);
          if (!found.length) {
            await resolveTool(pool, policy, name, wanted); // raises PermissionError when the policy hid it
            throw new RpcError("KeyError", `Server "${name}" has no tool "${wanted}"`);
          }
        }
        return found.map(detail === "full" ? toolFull : toolSummary);
      },
      async search_tool_docs(params) {
        const query = String(params.query ?? "").trim();
        if (!query) throw new RpcError("ValueError", "search_tool_docs needs a query");
        const limit = Math.max(1, Math.min(100, Number(params.limit ?? 5) || 5));
        const serverName = typeof params.server === "string" ? server(params) : undefined;
        const skillsOn = skills !== undefined && skills.mode !== "off";
        if (skillsOn) await (await skills.store?.())?.fresh();
        const visible = (hit: SearchHit) => {
          if (hit.kind === "skill") return skillsOn;
          const doc = docs.docs(hit.server).find((d) => d.tool === hit.tool);
          return policy.allowsTool(hit.server, hit.tool, doc?.annotations).ok;
        };
        // Hidden hits are dropped after ranking, so ask for the most and keep the first visible ones.
        const hits = policy.open && skillsOn
          ? await docs.search(query, { limit, server: serverName })
          : (await docs.search(query, { limit: 100, server: serverName })).filter(visible).slice(0, limit);
        const full = params.detail === "full";
        return hits.map((hit) => {
          if (hit.kind === "skill") return hit;
          const doc = docs.docs(hit.server).find((d) => d.tool === hit.tool);
          const detail = full && doc ? toolFull(doc) : { alias: pythonAlias(hit.tool) };
          return { ...hit, ...detail, description: hit.description, score: hit.score };
        });
      },
    };
  const skillApi: Record<string, RpcMethod> = skillMethods({
    mode: "off",
    upstream: { readSkill: () => Promise.reject(new Error("no upstream")) },
    skillDocs: () => [],
    toolDocs: () => Promise.resolve(undefined),
    ...skills,
    policy,
    resolveServer: (name) => server({ name }, "name"),
    allowedServers,
  });

  return async (method, params, context) => {
    if (Object.hasOwn(skillApi, method)) return await skillApi[method](params, context);
    const serve = Object.hasOwn(methods, method) ? methods[method] : undefined;
    if (!serve) throw new RpcError("NotImplementedError", `Unknown host method "${method}"`);
    return await serve(params, context);
  };
}

/** Finds a server by name or by its Python alias. */
function resolveServer(pool: ToolCaller, name: string): string | undefined {
  const names = pool.names();
  return names.includes(name) ? name : names.find((n) => pythonAlias(n) === name);
}

/**
 * Finds a tool by the server's own name (`get-sum`) or its alias (`get_sum`); raises PermissionError
 * for a tool the policy refuses, and AttributeError listing the allowed ones for a tool that isn't there.
 */
async function resolveTool(pool: ToolCaller, policy: Policy, server: string, tool: string): Promise<Tool> {
  if (!tool) throw new RpcError("ValueError", "A tool name is required");
  const tools = await pool.listTools(server);
  const match = tools.find((t) => t.name === tool) ?? tools.find((t) => pythonAlias(t.name) === tool);
  if (match) {
    enforce(policy.allowsTool(server, match.name, match.annotations));
    return match;
  }
  const available = tools.filter((t) => policy.allowsTool(server, t.name, t.annotations).ok);
  throw new RpcError(
    "AttributeError",
    `Server "${server}" has no tool "${tool}"; available: ${
      available.map((t) => pythonAlias(t.name)).join(", ") || "none"
    }`,
  );
}

/** Raises a refusal in the sandbox as PermissionError. */
function enforce(verdict: Verdict): void {
  if (!verdict.ok) throw new RpcError("PermissionError", verdict.reason);
}

/**
 * What sandbox code may know about a server: no command line, env, headers or URL (they hold secrets), and
 * the free text it does get (description, cwd) with those secrets redacted, in case the config repeats one.
 */
function publicServer(name: string, spec: ServerSpec | undefined): Record<string, unknown> {
  const info: Record<string, unknown> = {
    name,
    alias: pythonAlias(name),
    transport: spec?.transport ?? "stdio",
  };
  const secrets = spec ? secretsOf(spec) : [];
  if (spec?.description) info.description = redact(spec.description, secrets);
  if (spec?.cwd) info.cwd = redact(spec.cwd, secrets);
  if (spec?.source) info.source = spec.source.plugin;
  return info;
}
