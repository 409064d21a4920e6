/**
 * The text of the capabilities resource: what run_python offers, the discovery helpers, and the
 * configured servers by name (no schemas: those are fetched on demand from inside the sandbox).
 * @module
 */
import type { ServerSpec } from "../contracts/discovery.ts";
import { pythonAlias } from "../python_alias.ts";
import type { Policy } from "../config/policy.ts";

/** A skill as the capabilities text lists it. */
export interface SkillLine {
  name: string;
  description: string;
}

/** Skills listed by name at most; the rest are found with search. */
const MAX_SKILLS = 20;

/**
 * Markdown describing what sandbox code can do here (only the servers the policy allows are listed), and
 * the saved skills when `skills` is given (undefined: skills are off).
 */
export function capabilityText(
  servers: ServerSpec[],
  runtime?: string,
  policy?: Policy,
  skills?: { writable: boolean; list: SkillLine[] },
  registry?: { find: boolean; add: "off" | "ask" | "allow" },
): string {
  const lines = [
    "# codemode: run_python",
    "",
    "Python 3 in a sandbox with no network and no access to the host; `/tmp` and `/workspace` are writable.",
    "State (variables, imports) persists between calls; top-level `await` works (`asyncio` and `mcp` need",
    "no import); the value of a final expression is returned.",
    runtime ? `Sandbox runtime: ${runtime}.` : "",
    "",
    "## Calling MCP tools",
    "- `await mcp_<server>.<tool>(**arguments)`; also `mcp_servers['name']` and",
    "  `from mcp.servers.<server> import <tool>`. Names with `-` use `_`.",
    "- Results arrive unwrapped (structured content, JSON, text; images as bytes with `.mime_type`);",
    "  pass `raw=True` for the whole MCP result. A tool error raises `ToolError`.",
    "- `asyncio.gather(...)` runs calls in parallel.",
    "- Every failed call raises a `runtime.MCPError` (`ToolError`, `PermissionError`, ... are MCPErrors).",
    "- `async with runtime.dry_run():` (or `with`) plans calls instead of making them: tools not annotated",
    "  read-only return None and are listed in the result's `planned_calls`; read-only tools still run.",
    "- `help(mcp_x.tool)` shows a tool's typed signature; `await runtime.stubs(server)` returns a server's",
    "  Python stubs (.pyi: keyword-only signatures, TypedDicts, docstrings).",
    "",
    "## Checked before running",
    "Each program's tool calls are checked before it runs: an unknown server, tool or argument, a missing",
    "argument, a literal of the wrong type, a positional argument or a refused tool stops the run before any",
    "call, and the result lists each finding with its line, column and fix (`structuredContent.check`).",
    "`# codemode: nocheck` as a program's first line skips the check.",
    "",
    "## Approving a plan at once",
    '`async with runtime.plan("what it does") as p:` runs its block as a dry run, asks the user one',
    "question listing every call it would make, then runs it again for real: exactly those calls go out,",
    "others that could change something raise `PermissionError`, as does a declined plan. The block's other",
    "code runs twice (`p.dry` is True the first time).",
    "",
    "## Showing results",
    "- `display(obj)`: matplotlib figures and PIL images come back as PNG images, pandas DataFrames as",
    "  text tables, objects with `_repr_png_`/`_repr_markdown_`/`_repr_html_`/... by their richest form.",
    "- Open matplotlib figures are shown at `plt.show()` and at the end of each run; a DataFrame or",
    "  figure as the final expression is displayed too.",
    "",
    "## Finding tools (`from mcp import runtime`)",
    "The Python bridge's helpers, with its return shapes:",
    "- `runtime.discovered_servers()` (names); `await runtime.search_tool_docs('words', limit=5)`",
    "- `await runtime.query_tool_docs(server, tool=None, detail='summary'|'full')`: a list of docs",
    "  (`server`, `tool`, `toolAlias`, `description`, `inputSchema` when full), one dict with `tool=`",
    "- `await runtime.list_servers()` (names), `await runtime.list_tools(server)`,",
    "  `runtime.describe_server(name)`, `help(mcp_x.tool)`",
    "- `_sync` variants exist for the list/query/search helpers.",
    "",
    "## Files",
    "- Files written to `/workspace/artifacts/` (or `runtime.save_artifact(name, data)`) are sent to the",
    "  client after the run as resources (`codemode://artifacts/...`). Mounted host folders, if any, are",
    "  under `/data`, `/mnt` or `/workspace`.",
    "",
    `## Configured servers (${servers.length})`,
    ...servers.map((s) => `- \`${pythonAlias(s.name)}\`${s.description ? `: ${s.description}` : ""}`),
    ...skillLines(skills),
    ...registryLines(registry),
    ...policyLines(policy),
    ...approvalLines(policy),
  ];
  return lines.filter((line, i, all) => !(line === "" && all[i - 1] === "")).join("\n") + "\n";
}

/** How to use saved skills, and which exist (capped; search finds the rest). */
function skillLines(skills: { writable: boolean; list: SkillLine[] } | undefined): string[] {
  if (!skills) return [];
  const shown = skills.list.slice(0, MAX_SKILLS).map((s) => {
    const line = s.description.length > 100 ? `${s.description.slice(0, 99)}…` : s.description;
    return `- \`${s.name.replaceAll("-", "_")}\`: ${line}`;
  });
  return [
    "",
    `## Skills (${skills.list.length})`,
    "Saved code and know-how: `from skills import <name>`, then `await <name>.<function>(...)`.",
    "`await runtime.list_skills()`, `await runtime.read_skill(name)`; search finds them (server `skills`).",
    skills.writable
      ? "Save working code for later sessions: `await runtime.save_skill(name, code_or_function, description)`."
      : "",
    ...shown,
    skills.list.length > MAX_SKILLS ? `- ... ${skills.list.length - MAX_SKILLS} more: list_skills()` : "",
  ].filter((line, i) => line !== "" || i === 0);
}

/** The order for the model: configured tools first, then the registry, then asking to add a server. */
function registryLines(registry: { find: boolean; add: "off" | "ask" | "allow" } | undefined): string[] {
  if (!registry?.find) return [];
  return [
    "",
    "## More servers (the MCP registry)",
    "1. Search the configured tools first: `await runtime.search_tool_docs('words')`.",
    "2. Only when none fits: `await runtime.find_servers('name words', limit=10)` searches the MCP registry",
    "   by server name (dicts: `name`, `description`, `version`, `run`, `env`, `allowed`, `why`).",
    registry.add === "off"
      ? "3. Adding servers is off here: tell the user which server would help (they can set CODEMODE_ADD_SERVERS=ask)."
      : `3. \`info = await runtime.add_server(name, alias=None)\` ${
        registry.add === "ask" ? "asks the user, then starts it" : "starts it"
      }; \`mcp_<alias>\` works in the same run. \`await runtime.remove_server(alias)\` stops it.`,
  ];
}

/** Which calls wait for the user's approval, and what a refusal looks like. */
function approvalLines(policy: Policy | undefined): string[] {
  if (!policy?.asksApproval) return [];
  const r = policy.rules;
  return [
    "",
    "## Approvals",
    "- Some calls wait until the user approves them (the run's timeout stops meanwhile); a refusal raises",
    '  `PermissionError` ("declined by the user"), and the program can carry on from there.',
    r.confirm.length ? `- Asked for: ${r.confirm.map((g) => `\`${g}\``).join(", ")}.` : "",
    r.confirmDestructive
      ? "- Asked for every tool not annotated `readOnlyHint` or `destructiveHint: false`."
      : "",
    "- To show a plan first: run the code inside `runtime.dry_run()`, then again for real.",
  ].filter((line, i) => line !== "" || i === 0);
}

/** What the policy means for sandbox code, so a model does not learn it by trial and error. */
function policyLines(policy: Policy | undefined): string[] {
  if (!policy || policy.open) return [];
  const r = policy.rules;
  return [
    "",
    "## Policy",
    "- Some servers or tools may be hidden; naming one raises `PermissionError` saying which rule refused it.",
    r.readOnly ? "- Read-only: only tools annotated `readOnlyHint` can be called." : "",
    r.maxToolCalls !== undefined ? `- At most ${r.maxToolCalls} tool calls per run_python call.` : "",
  ].filter((line, i) => line !== "" || i === 0);
}
