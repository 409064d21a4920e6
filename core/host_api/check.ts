/**
 * The host side of the pre-run check (`check_calls`): the tool calls a program writes with literal names,
 * found and resolved in the sandbox (sandbox/mcp/_precheck.py), checked against what the host alone knows:
 * the session's servers (configured, and those it added), their current tools and input schemas, and the
 * policy. Each certain problem is a
 * finding with the call's line and column, a message and a one-line fix; the sandbox refuses to run a
 * program with any. Unknown server, unknown tool (with the nearest names), unknown keyword (a schema is
 * closed unless it explicitly allows more; the proxies' own `raw=` never counts), missing required
 * keyword, a literal that cannot match the schema, positional arguments, and a server or tool the policy
 * refuses. A server whose tools cannot be listed is not checked.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/client";
import { pythonAlias } from "../python_alias.ts";
import type { Policy } from "../config/policy.ts";
import { nearest } from "../catalog/nearest.ts";
import { mismatch } from "../catalog/literal_match.ts";
import { closed, isSchema, propertiesOf } from "../catalog/schema.ts";
import { schemaType } from "../catalog/stubs.ts";
import type { CheckFinding } from "../contracts/output.ts";
import { writtenCall } from "../skills/check.ts";

/** One call as the sandbox reports it. */
export interface CheckedCall {
  line: number;
  col: number;
  /** The server's name; as written (an alias, or a name nothing has) when `unbound`. */
  server: string;
  /** The tool as written: its name or its alias ("" for an import statement alone). */
  tool: string;
  via: "proxy" | "servers" | "call_tool" | "import";
  keywords?: string[];
  /** Literal values of keywords (unknown parts are null). */
  values?: Record<string, unknown>;
  dynamic?: boolean;
  positional?: number;
  /** The sandbox has nothing by this server name: the call fails as it is written. */
  unbound?: boolean;
  /** `from mcp.servers.<alias> import ...` of a server the sandbox does not have. */
  import_only?: boolean;
}

/** What the check needs from the host. */
export interface CheckDeps {
  /** Every server the session has (the pool's names: configured, and added by the session). */
  names(): string[];
  listTools(server: string): Promise<Tool[]>;
  policy: Policy;
  /** How long to wait for a server's tools (default CHECK_CALL_LIMITS.listMs). */
  listMs?: number;
}

/**
 * Most calls one check looks at, most findings it returns, and how long it waits for a server's tools (a
 * server that is slow to start is not checked then: its listing goes on, warming it for the run).
 */
export const CHECK_CALL_LIMITS = { calls: 10_000, findings: 200, listMs: 5000 } as const;

/** The `check_calls` RPC method's answer: the findings for the calls the sandbox found. */
export async function checkCalls(
  params: Record<string, unknown>,
  deps: CheckDeps,
): Promise<{ findings: CheckFinding[] }> {
  const calls = Array.isArray(params.calls) ? params.calls.slice(0, CHECK_CALL_LIMITS.calls) : [];
  return { findings: await checkProgramCalls(calls.filter(wellFormed), deps) };
}

/** The findings for a program's calls, in the order of the calls. */
export async function checkProgramCalls(calls: CheckedCall[], deps: CheckDeps): Promise<CheckFinding[]> {
  const findings: CheckFinding[] = [];
  const listed = new Map<string, Promise<Tool[] | undefined>>();
  const toolsOf = (server: string) => {
    if (!listed.has(server)) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), deps.listMs ?? CHECK_CALL_LIMITS.listMs);
      });
      const tools = deps.listTools(server).catch(() => undefined);
      listed.set(server, Promise.race([tools, late]).finally(() => clearTimeout(timer)));
    }
    return listed.get(server)!;
  };
  for (const call of calls) {
    if (findings.length >= CHECK_CALL_LIMITS.findings) break;
    const problem = await checkOne(call, deps, toolsOf);
    for (const p of problem) findings.push({ line: call.line, col: call.col, ...p });
  }
  return findings.slice(0, CHECK_CALL_LIMITS.findings);
}

type Problem = Omit<CheckFinding, "line" | "col">;

async function checkOne(
  call: CheckedCall,
  deps: CheckDeps,
  toolsOf: (server: string) => Promise<Tool[] | undefined>,
): Promise<Problem[]> {
  const servers = deps.names();
  const server = findServer(servers, call.server);
  if (call.unbound) return server ? misnamedServer(call, server) : unknownServer(call, servers, deps.policy);
  if (!server) return []; // a server the sandbox has and the host does not here: not ours to judge
  const tools = await toolsOf(server);
  if (!tools) return [];
  const written = writtenAs(call);
  const tool = findTool(tools, call.tool, (t) => deps.policy.allowsTool(server, t.name, t.annotations).ok);
  if (!tool) {
    const allowed = tools.filter((t) => deps.policy.allowsTool(server, t.name, t.annotations).ok);
    const near = nearest(call.tool, allowed.map((t) => pythonAlias(t.name)));
    return [{
      kind: "unknown-tool",
      message: `${written}: server "${server}" has no tool "${call.tool}"`,
      fix: near.length
        ? `did you mean ${near.map((n) => retarget(call, n)).join(" or ")}?`
        : `dir(${
          proxyName(call, server)
        }) lists its tools; await runtime.search_tool_docs("...") searches them`,
    }];
  }
  const verdict = deps.policy.allowsTool(server, tool.name, tool.annotations);
  if (!verdict.ok) {
    return [{
      kind: "refused",
      message: `${written}: ${verdict.reason}`,
      fix: "use another tool: this one is refused here",
    }];
  }
  const schema = isSchema(tool.inputSchema) ? tool.inputSchema as Record<string, unknown> : {};
  const properties = Object.keys(propertiesOf(schema));
  const required = Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === "string") : [];
  const problems: Problem[] = [];
  if (call.positional && call.via !== "call_tool") {
    const names = (required.length ? required : properties).slice(0, 3);
    problems.push({
      kind: "positional",
      message: `${written}: tools take keyword arguments only (${call.positional} positional given)`,
      fix: `name each argument: ${
        retarget(call, pythonAlias(tool.name), names.map((n) => `${n}=...`).join(", "))
      }`,
    });
  }
  const given = (call.keywords ?? []).filter((k) => typeof k === "string");
  const own = call.via === "call_tool" ? given : given.filter((k) => k !== "raw");
  // With combinators or references at the top, which keys the schema takes is not read here.
  const readable = closed(schema) &&
    !["anyOf", "oneOf", "allOf", "$ref", "if", "not"].some((k) => k in schema);
  // A misspelt keyword is one problem, not also a missing one: its fix names the right spelling.
  const meant = new Set<string>();
  if (readable) {
    for (const keyword of own.filter((k) => !properties.includes(k))) {
      const near = nearest(keyword, properties, 1);
      if (near.length && !given.includes(near[0])) meant.add(near[0]);
      problems.push({
        kind: "unknown-argument",
        message: `${written}: "${tool.name}" takes no argument "${keyword}"`,
        fix: near.length
          ? `did you mean ${near[0]}=...? It takes: ${list(properties)}`
          : `it takes: ${list(properties)}`,
      });
    }
  }
  if (!call.dynamic && !call.positional) {
    for (const name of required.filter((r) => !given.includes(r) && !meant.has(r))) {
      const type = schemaType(propertiesOf(schema)[name]);
      problems.push({
        kind: "missing-argument",
        message: `${written}: "${tool.name}" needs the argument "${name}"`,
        fix: `add ${name}=... (${name}: ${type})`,
      });
    }
  }
  const values = call.values && typeof call.values === "object" ? call.values : {};
  for (const [name, value] of Object.entries(values)) {
    const property = propertiesOf(schema)[name];
    const why = property === undefined ? undefined : mismatch(value, property, schema);
    if (why) {
      problems.push({
        kind: "bad-value",
        message: `${written}: argument "${name}" of "${tool.name}": ${why}`,
        fix: `pass ${name} as ${schemaType(property)}`,
      });
    }
  }
  return problems;
}

/** A server the sandbox does not have by the name written: unknown, or refused by the policy. */
function unknownServer(call: CheckedCall, servers: string[], policy: Policy): Problem[] {
  const written = call.import_only ? `from mcp.servers.${call.server} import ...` : writtenAs(call);
  const verdict = policy.allowsServer(call.server);
  if (!verdict.ok) {
    return [{ kind: "refused", message: `${written}: ${verdict.reason}`, fix: "use another server" }];
  }
  const byAlias = call.via === "proxy" || call.via === "import";
  const names = byAlias ? servers.map(pythonAlias) : servers;
  const near = nearest(call.server, names, 2);
  const spell = (name: string) =>
    call.via === "proxy"
      ? `mcp_${name}`
      : call.via === "import"
      ? `from mcp.servers.${name} import ...`
      : JSON.stringify(name);
  return [{
    kind: "unknown-server",
    message: `${written}: no MCP server ${JSON.stringify(call.server)} is configured (configured: ${
      list(names)
    })`,
    fix: near.length
      ? `did you mean ${near.map(spell).join(" or ")}?`
      : "runtime.discovered_servers() lists the servers; await runtime.search_tool_docs(...) finds tools",
  }];
}

/** `mcp_servers["my_alias"]`: the dict is keyed by server names, not aliases. */
function misnamedServer(call: CheckedCall, server: string): Problem[] {
  if (call.via !== "servers") return []; // the sandbox and the host disagree: not certain
  return [{
    kind: "unknown-server",
    message: `${writtenAs(call)}: mcp_servers is keyed by server name, and "${call.server}" is an alias`,
    fix: `write mcp_servers[${JSON.stringify(server)}] (or mcp_${pythonAlias(server)})`,
  }];
}

/** Finds a server by name or by its Python alias. */
export function findServer(names: readonly string[], name: string): string | undefined {
  return names.includes(name) ? name : names.find((n) => pythonAlias(n) === name);
}

/**
 * Finds a tool by the server's own name (`get-sum`) or its alias (`get_sum`). A tool's own name wins; of
 * tools sharing an alias the first listed owns it, as in the sandbox's proxies, except that one `allowed`
 * refuses does not shadow the next.
 */
export function findTool(
  tools: readonly Tool[],
  name: string,
  allowed: (tool: Tool) => boolean = () => true,
): Tool | undefined {
  const exact = tools.find((t) => t.name === name);
  if (exact) return exact;
  const aliased = aliasesOf(tools).get(name) ?? [];
  return aliased.find(allowed) ?? aliased[0];
}

/**
 * A listing's tools by Python alias. Built once per listing (a server's listing is kept until its tools
 * change) rather than on every call, which made each call's cost grow with the server's tool count.
 */
const byAlias = new WeakMap<readonly Tool[], Map<string, Tool[]>>();

function aliasesOf(tools: readonly Tool[]): Map<string, Tool[]> {
  let aliases = byAlias.get(tools);
  if (aliases) return aliases;
  aliases = new Map();
  for (const tool of tools) {
    const alias = pythonAlias(tool.name);
    const same = aliases.get(alias);
    if (same) same.push(tool);
    else aliases.set(alias, [tool]);
  }
  byAlias.set(tools, aliases);
  return aliases;
}

/** The call as the program wrote it (proxies and imports by the server's alias). */
function writtenAs(call: CheckedCall): string {
  const byAlias = call.via === "proxy" || call.via === "import";
  return writtenCall({ ...call, server: byAlias ? pythonAlias(call.server) : call.server });
}

/** The same call with another tool (and, if given, arguments), spelled the way the program spelled it. */
function retarget(call: CheckedCall, tool: string, args = "..."): string {
  switch (call.via) {
    case "servers":
      return `mcp_servers[${JSON.stringify(call.server)}].${tool}(${args})`;
    case "call_tool":
      return `call_tool(${JSON.stringify(call.server)}, ${JSON.stringify(tool)}, {...})`;
    case "import":
      return `${tool}(${args}) (from mcp.servers.${pythonAlias(call.server)} import ${tool})`;
    default:
      return `mcp_${pythonAlias(call.server)}.${tool}(${args})`;
  }
}

function proxyName(call: CheckedCall, server: string): string {
  return call.via === "servers" ? `mcp_servers[${JSON.stringify(server)}]` : `mcp_${pythonAlias(server)}`;
}

function list(names: string[]): string {
  if (!names.length) return "none";
  return names.length > 12 ? `${names.slice(0, 12).join(", ")}, ...` : names.join(", ");
}

function wellFormed(raw: unknown): raw is CheckedCall {
  if (!raw || typeof raw !== "object") return false;
  const c = raw as Record<string, unknown>;
  return typeof c.server === "string" && typeof c.tool === "string" && c.server.length <= 512 &&
    c.tool.length <= 512 && ["proxy", "servers", "call_tool", "import"].includes(String(c.via)) &&
    Number.isSafeInteger(c.line) && Number.isSafeInteger(c.col) &&
    (c.keywords === undefined || Array.isArray(c.keywords));
}
