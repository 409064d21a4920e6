/**
 * What sandbox code can ask of the host: tool calls, server and tool docs, search. Each RPC method the
 * Python `mcp` package uses is served here. Server secrets (env, headers, args, urls) never cross.
 * The policy applies here: refused servers and tools are left out of every listing and search, and
 * naming one raises PermissionError saying which rule refused it. Calls the policy says the user must
 * approve wait for the run's approver; calls a dry run marks are made only when the tool's own
 * annotations say it is read-only, and recorded otherwise; inside a plan (plan_api.ts) only the calls the
 * user approved go out. A session that added servers from a registry sees them beside the configured ones
 * (its own view: in calls, docs, stubs, the pre-run check and plan questions); no other session does. Each
 * tool call is a span of the run's trace, and its context alone goes upstream as the request's
 * `_meta.traceparent`.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import type { ToolReply } from "../upstream/lean_calls.ts";
import type { ServerSpec } from "../contracts/discovery.ts";
import { pythonAlias } from "../python_alias.ts";
import { isReadOnly, Policy, type Verdict } from "../config/policy.ts";
import { redact, redactArguments, secretsOf } from "../upstream/redact.ts";
import { pythonErrorType, type RpcContext, RpcError, type RpcHandler } from "./rpc.ts";
import { summarizeArguments } from "./approvals.ts";
import { recordToolCall, type ToolCallRecord, traceToolResult } from "./tool_call_activity.ts";
import { ATTR, inSpan, type TraceContext, type TraceSpan } from "../observe/trace.ts";
import { type ToolDoc, toolDoc, toolFull, toolSummary } from "../catalog/docs.ts";
import type { SearchHit } from "../catalog/index.ts";
import { type RpcMethod, skillMethods, type SkillsApiDeps } from "./skills_api.ts";
import { jsonSize } from "../upstream/tool_caps.ts";
import { checkCalls, findServer, findTool } from "./check.ts";
import { serverStub, toolStub } from "../catalog/stubs.ts";
import { planMethods } from "./plan_api.ts";

/** Characters of full docs one `search_tool_docs(detail="full")` reply carries at most. */
export const FULL_HITS_BUDGET = 4 * 1024 * 1024;

export type { RpcMethod } from "./skills_api.ts";

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
    options?: { signal?: AbortSignal; meta?: TraceContext },
  ): Promise<ToolReply>;
}

/** The doc side: search over every configured server (cached), and docs already indexed. */
export interface DocSearch {
  search(query: string, options: { limit?: number; server?: string }): SearchHit[] | Promise<SearchHit[]>;
  /** Indexed docs of one server: search hits are checked against the policy with their annotations. */
  docs(server: string): ToolDoc[];
}

/** What one session reaches: the upstream servers and their docs (its added servers among them). */
export interface ServerView {
  pool: ToolCaller;
  docs: DocSearch;
  /** Secrets of the view's servers beyond the configured ones (kept out of approval questions). */
  secrets?(): string[];
}

/** What the API serves beyond the configured servers, and how plans treat calls they did not list. */
export interface ApiOptions {
  /** The view of a session that added servers; undefined: the configured servers alone. */
  view?: (session: string) => ServerView | undefined;
  /** More methods, served with the same dispatch (e.g. the registry's, registry_api.ts). */
  methods?: Record<string, RpcMethod>;
  /** A call in an approved plan's block that the plan did not list: refused (default) or asked about. */
  unplanned?: "deny" | "ask";
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
  options: ApiOptions = {},
): RpcHandler {
  const base: ServerView = { pool, docs };
  const viewOf = (context: RpcContext) => options.view?.(context.session) ?? base;
  const unplanned = options.unplanned ?? "deny";
  // One AbortSignal per run, so counting by signal counts per run and forgets finished runs by itself.
  const callsMade = new WeakMap<AbortSignal, number>();
  const allowedServers = (view = base) => view.pool.names().filter((n) => policy.allowsServer(n).ok);
  const server = (view: ServerView, params: Record<string, unknown>, key = "server"): string => {
    const name = params[key];
    if (typeof name !== "string" || !name) throw new RpcError("ValueError", `"${key}" must be a server name`);
    const resolved = resolveServer(view.pool, name);
    enforce(policy.allowsServer(resolved ?? name));
    if (!resolved) {
      throw new RpcError(
        "KeyError",
        `Unknown server "${name}"; configured: ${allowedServers(view).join(", ") || "none"}`,
      );
    }
    return resolved;
  };
  const allowed = (d: ToolDoc) => policy.allowsTool(d.server, d.tool, d.annotations).ok;
  // Configured secrets of every server, kept out of the questions people read (specs never change).
  let secrets: string[] | undefined;
  const configuredSecrets = () =>
    secrets ??= [...new Set(pool.names().flatMap((n) => secretsOf(pool.spec(n) ?? {})))]
      .sort((a, b) => b.length - a.length);
  const allSecrets = (view: ServerView) =>
    view.secrets
      ? [...configuredSecrets(), ...view.secrets()].sort((a, b) => b.length - a.length)
      : configuredSecrets();
  /** Waits for the user's approval of a call the policy asks about; raises PermissionError when refused. */
  const approved = async (
    context: RpcContext,
    view: ServerView,
    server: string,
    tool: string,
    args: object,
    reason: string,
  ) => {
    const request = {
      server,
      tool,
      reason,
      summary: summarizeArguments(args as Record<string, unknown>, allSecrets(view)),
    };
    const answer = context.approve ? await context.approve(request) : {
      approved: false,
      message:
        `Call to "${server}/${tool}" needs the user's approval (${reason}), and nobody can be asked here`,
    };
    if (!answer.approved) throw new RpcError("PermissionError", answer.message ?? "Declined by the user");
    if (answer.message) context.note?.(answer.message);
  };
  const toolDocs = async (view: ServerView, name: string): Promise<ToolDoc[]> =>
    (await view.pool.listTools(name)).map((t) => toolDoc(name, t)).filter(allowed);

  /** One tool call, in its span (a child of the run's, whose context goes to the server in `_meta`). */
  const callTool = async (
    params: Record<string, unknown>,
    context: RpcContext,
    view: ServerView,
    span: TraceSpan,
  ) => {
    const pool = view.pool;
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
      const name = call.server = server(view, params);
      call.spec = pool.spec(name);
      const tool = await resolveTool(pool, policy, name, call.tool);
      call.tool = tool.name;
      span.rename(`tools/call ${tool.name}`);
      span.set({
        [ATTR.tool]: tool.name,
        [ATTR.server]: name,
        [ATTR.transport]: call.spec?.transport === "stdio" ? "pipe" : "tcp",
      });
      if (typeof args !== "object" || args === null || Array.isArray(args)) {
        throw new RpcError("TypeError", "Tool arguments must be keyword arguments (a dict)");
      }
      const made = callsMade.get(signal) ?? 0;
      enforce(policy.allowsCall(made));
      callsMade.set(signal, made + 1);
      const planned = { server: name, tool: tool.name, arguments: args as Record<string, unknown> };
      const plan = params.plan === undefined ? undefined : context.plans?.get(params.plan);
      if (params.plan !== undefined && !plan) throw new RpcError("PermissionError", "No plan runs here");
      // The sandbox only asks for a dry call; whether the tool merely reads is the server's word, not its.
      // A planned call is not made, so it is no tool call in the activity record either.
      if (params.dry_run === true && !isReadOnly(tool.annotations)) {
        if (plan && plan.state !== "rehearsing") {
          throw new RpcError("PermissionError", "The plan's rehearsal is over");
        }
        if (plan) plan.record(planned);
        else context.plan?.(planned);
        span.set({ "codemode.planned": true });
        return null;
      }
      let reason = policy.approvalReason(name, tool.name, tool.annotations);
      // Approved with the plan: no further question. Anything else is refused, or asked on its own.
      if (plan && !isReadOnly(tool.annotations)) reason = plan.admit(planned, unplanned);
      if (reason !== undefined) await approved(context, view, name, tool.name, args, reason);
      span.content(ATTR.toolArguments, () => redactArguments(args, allSecrets(view)));
      // The trace context sent upstream is the host's span's, whatever sandbox code put in its params.
      const reply = await pool.callToolReply(name, tool.name, args as Record<string, unknown>, {
        signal,
        meta: span.context(),
      });
      recordToolCall(call, { result: reply.result });
      traceToolResult(span, reply.result);
      return codec(reply, params.raw === true);
    } catch (error) {
      recordToolCall(call, { error });
      span.fail(error, pythonErrorType(error));
      throw error;
    }
  };

  type Method = (params: Record<string, unknown>, context: RpcContext, view: ServerView) => Promise<unknown>;
  const methods: Record<string, Method> = {
    call_tool(params, context, view) {
      return inSpan("tools/call", TOOL_CALL, (span) => callTool(params, context, view, span), TOOL_CALL_SPAN);
    },
    list_servers(_params, _context, view) {
      return Promise.resolve(allowedServers(view).map((name) => publicServer(name, view.pool.spec(name))));
    },
    // Tools in full (with input schemas): the bridge's list_tools and server metadata carry them.
    async describe_server(params, _context, view) {
      const name = server(view, params, "name");
      return {
        ...publicServer(name, view.pool.spec(name)),
        tools: (await toolDocs(view, name)).map(toolFull),
      };
    },
    // Several servers with their tools (list_loaded_server_metadata): indexed docs, else listed now.
    async describe_servers(params, _context, view) {
      const asked = Array.isArray(params.names)
        ? params.names.filter((n): n is string => typeof n === "string").slice(0, 1000)
        : allowedServers(view);
      const names = [...new Set(asked.map((n) => resolveServer(view.pool, n)))]
        .filter((n): n is string => n !== undefined && policy.allowsServer(n).ok);
      return await Promise.all(names.map(async (name) => {
        const indexed = view.docs.docs(name).filter(allowed);
        const tools = indexed.length ? indexed : await toolDocs(view, name).catch(() => []);
        return { ...publicServer(name, view.pool.spec(name)), tools: tools.map(toolFull) };
      }));
    },
    async list_tools(params, _context, view) {
      return (await toolDocs(view, server(view, params))).map(toolFull);
    },
    async query_tool_docs(params, _context, view) {
      const name = server(view, params);
      const detail = params.detail === "full" ? "full" : "summary";
      let found = await toolDocs(view, name);
      if (typeof params.tool === "string" && params.tool) {
        const wanted = params.tool;
        found = found.filter((d) => d.tool === wanted || pythonAlias(d.tool) === wanted);
        if (!found.length) {
          await resolveTool(view.pool, policy, name, wanted); // raises PermissionError when the policy hid it
          throw new RpcError("KeyError", `Server "${name}" has no tool "${wanted}"`);
        }
      }
      return found.map(detail === "full" ? toolFull : toolSummary);
    },
    // Python stubs of a server's tools (runtime.stubs), or of one tool with its signature (help()).
    async stubs(params, _context, view) {
      const name = server(view, params);
      const docs = await toolDocs(view, name);
      if (typeof params.tool !== "string" || !params.tool) return { text: serverStub(name, docs) };
      const wanted = params.tool;
      const doc = docs.find((d) => d.tool === wanted) ?? docs.find((d) => pythonAlias(d.tool) === wanted);
      if (!doc) {
        await resolveTool(view.pool, policy, name, wanted); // raises PermissionError when the policy hid it
        throw new RpcError("KeyError", `Server "${name}" has no tool "${wanted}"`);
      }
      return toolStub(doc);
    },
    // The pre-run check (check.ts) against this session's servers; a program that adds servers is
    // checked against the configured ones alone (what it adds may replace what the session had).
    check_calls(params, _context, view) {
      const servers = params.adds_servers === true ? base : view;
      return checkCalls(params, {
        names: () => servers.pool.names(),
        listTools: (n) => servers.pool.listTools(n),
        policy,
      });
    },
    async search_tool_docs(params, _context, view) {
      const docs = view.docs;
      const query = String(params.query ?? "").trim();
      if (!query) throw new RpcError("ValueError", "search_tool_docs needs a query");
      const limit = Math.max(1, Math.min(100, Number(params.limit ?? 5) || 5));
      const serverName = typeof params.server === "string" ? server(view, params) : undefined;
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
      let budget = FULL_HITS_BUDGET;
      return hits.map((hit) => {
        if (hit.kind === "skill") return hit;
        const doc = docs.docs(hit.server).find((d) => d.tool === hit.tool);
        const summary = { ...hit, alias: pythonAlias(hit.tool) };
        if (!full || !doc) return summary;
        // Full docs of up to 100 hits could outgrow a frame: each goes in while the reply has room.
        const detail = toolFull(doc);
        const size = jsonSize(detail);
        if (size > budget) {
          return {
            ...summary,
            skipped: `its full doc (${size} characters) does not fit in this reply: ` +
              `query_tool_docs(${JSON.stringify(hit.server)}, ${
                JSON.stringify(hit.tool)
              }, detail="full") has it`,
          };
        }
        budget -= size;
        return { ...summary, ...detail, description: detail.description, score: hit.score };
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
    resolveServer: (name) => server(base, { name }, "name"),
    allowedServers: () => allowedServers(),
  });
  const more: Record<string, RpcMethod> = {
    ...options.methods,
    ...planMethods({ secrets: (context) => allSecrets(viewOf(context)) }),
  };

  return async (method, params, context) => {
    if (Object.hasOwn(skillApi, method)) return await skillApi[method](params, context);
    if (Object.hasOwn(more, method)) return await more[method](params, context);
    const serve = Object.hasOwn(methods, method) ? methods[method] : undefined;
    if (!serve) throw new RpcError("NotImplementedError", `Unknown host method "${method}"`);
    return await serve(params, context, viewOf(context));
  };
}

/** What every tool call's span starts with (the MCP conventions' client span of a tools/call). */
const TOOL_CALL = { [ATTR.mcpMethod]: "tools/call", [ATTR.operation]: "execute_tool" };
const TOOL_CALL_SPAN = { kind: "client", toolCall: true } as const;

/** Finds a server by name or by its Python alias. */
function resolveServer(pool: ToolCaller, name: string): string | undefined {
  return findServer(pool.names(), name);
}

/**
 * Finds a tool by the server's own name (`get-sum`) or its alias (`get_sum`); raises PermissionError
 * for a tool the policy refuses, and AttributeError listing the allowed ones for a tool that isn't there.
 */
async function resolveTool(pool: ToolCaller, policy: Policy, server: string, tool: string): Promise<Tool> {
  if (!tool) throw new RpcError("ValueError", "A tool name is required");
  const tools = await pool.listTools(server);
  const match = findTool(tools, tool, (t) => policy.allowsTool(server, t.name, t.annotations).ok);
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
  if (!spec) return describeServer(name, undefined);
  let info = publicServers.get(spec);
  if (info?.name !== name) publicServers.set(spec, info = describeServer(name, spec));
  return { ...info };
}

/**
 * publicServer's answers by spec. A loaded spec never changes (a config reload or an added server makes new
 * ones), and finding and redacting its secrets on every `list_servers` cost more than the call's hop.
 */
const publicServers = new WeakMap<ServerSpec, Record<string, unknown>>();

function describeServer(name: string, spec: ServerSpec | undefined): Record<string, unknown> {
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
