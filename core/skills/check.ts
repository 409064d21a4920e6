/**
 * The drift check: the MCP tool calls a skill's code makes (found by Python's `ast` inside a sandbox, see
 * sandbox/mcp/_skill_code.py) checked against the current catalog. An unknown server, an unknown tool, an
 * unknown keyword argument, a missing required one, or a call the policy refuses is a finding with its
 * file and line. Calls whose names or arguments are not literals are not guessed at.
 * @module
 */
import type { ToolDoc } from "../catalog/docs.ts";
import type { Policy } from "../config/policy.ts";
import { pythonAlias } from "../python_alias.ts";

/** One tool call in a skill's code, as the sandbox's `ast` pass reports it. */
export interface SkillCall {
  line: number;
  /** The server as written: its name (`mcp_servers["..."]`, `call_tool`) or alias (`mcp_<alias>`). */
  server: string;
  /** The tool as written: its name or alias. */
  tool: string;
  /** Literal keyword arguments. */
  keywords?: string[];
  /** Arguments that can't be read statically (`**kwargs`, a non-literal dict): keyword checks are skipped. */
  dynamic?: boolean;
  /** Positional arguments given to a proxy, which takes keywords only. */
  positional?: number;
  /** How the call was written. */
  via?: "proxy" | "servers" | "call_tool" | "import";
}

/** What kind of problem a finding is. */
export type FindingKind =
  | "syntax"
  | "unknown-server"
  | "unknown-tool"
  | "unknown-argument"
  | "missing-argument"
  | "positional"
  | "refused";

/** One problem in one skill. */
export interface SkillFinding {
  skill: string;
  file: string;
  line: number;
  kind: FindingKind;
  message: string;
}

/** What a check needs to know about the world. */
export interface CheckContext {
  /** Servers sandbox code may use (configured and allowed). */
  servers: string[];
  /** A server's tools; undefined when they could not be listed (its calls are then not checked). */
  tools(server: string): Promise<ToolDoc[] | undefined>;
  policy?: Policy;
}

/** The findings for a skill's calls, and the servers whose tools were unknown (so not checked). */
export interface CheckResult {
  findings: SkillFinding[];
  unchecked: string[];
}

/** Checks `calls` of one skill file against the servers and tools `context` knows. */
export async function checkCalls(
  skill: string,
  file: string,
  calls: readonly SkillCall[],
  context: CheckContext,
): Promise<CheckResult> {
  const findings: SkillFinding[] = [];
  const unchecked = new Set<string>();
  const finding = (call: SkillCall, kind: FindingKind, message: string) =>
    findings.push({ skill, file, line: Number(call.line) || 0, kind, message });
  for (const call of calls.slice(0, 10_000)) {
    if (typeof call?.server !== "string" || typeof call.tool !== "string") continue;
    const written = writtenCall(call);
    const server = context.servers.find((s) => s === call.server) ??
      context.servers.find((s) => pythonAlias(s) === call.server);
    if (!server) {
      const refused = context.policy?.allowsServer(call.server);
      if (refused && !refused.ok) finding(call, "refused", `${written}: ${refused.reason}`);
      else {
        finding(
          call,
          "unknown-server",
          `${written}: no MCP server "${call.server}" is configured (configured: ${
            list(context.servers.map(pythonAlias))
          })`,
        );
      }
      continue;
    }
    const tools = await context.tools(server);
    if (!tools) {
      unchecked.add(server);
      continue;
    }
    const doc = tools.find((t) => t.tool === call.tool) ??
      tools.find((t) => pythonAlias(t.tool) === call.tool);
    if (!doc) {
      finding(
        call,
        "unknown-tool",
        `${written}: server "${server}" has no tool "${call.tool}" (it has: ${
          list(tools.map((t) => pythonAlias(t.tool)))
        })`,
      );
      continue;
    }
    const verdict = context.policy?.allowsTool(server, doc.tool, doc.annotations);
    if (verdict && !verdict.ok) finding(call, "refused", `${written}: ${verdict.reason}`);
    if (call.positional) {
      finding(call, "positional", `${written}: tools take keyword arguments only`);
    }
    if (call.dynamic) continue;
    const schema = doc.inputSchema ?? {};
    const properties = (schema.properties && typeof schema.properties === "object")
      ? Object.keys(schema.properties as object)
      : [];
    const open = schema.additionalProperties === true || typeof schema.additionalProperties === "object";
    const given = (call.keywords ?? []).filter((k) => typeof k === "string");
    // `raw=True` belongs to the proxy, not to the tool.
    const ownKeywords = call.via === "call_tool" ? given : given.filter((k) => k !== "raw");
    for (const keyword of ownKeywords) {
      if (!open && !properties.includes(keyword)) {
        finding(
          call,
          "unknown-argument",
          `${written}: "${doc.tool}" takes no argument "${keyword}" (it takes: ${list(properties)})`,
        );
      }
    }
    const required = Array.isArray(schema.required)
      ? schema.required.filter((r) => typeof r === "string")
      : [];
    for (const name of required) {
      if (!given.includes(name)) {
        finding(call, "missing-argument", `${written}: "${doc.tool}" needs the argument "${name}"`);
      }
    }
  }
  return { findings, unchecked: [...unchecked] };
}

/** The call as a person would recognise it in the code (`server` as it is written there). */
export function writtenCall(call: Pick<SkillCall, "server" | "tool" | "via">): string {
  switch (call.via) {
    case "servers":
      return `mcp_servers[${JSON.stringify(call.server)}].${call.tool}(...)`;
    case "call_tool":
      return `call_tool(${JSON.stringify(call.server)}, ${JSON.stringify(call.tool)}, ...)`;
    case "import":
      return `${call.tool}(...) from mcp.servers.${call.server}`;
    default:
      return `mcp_${call.server}.${call.tool}(...)`;
  }
}

function list(names: string[]): string {
  if (!names.length) return "none";
  return names.length > 12 ? `${names.slice(0, 12).join(", ")}, ...` : names.join(", ");
}
