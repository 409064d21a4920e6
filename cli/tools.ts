/**
 * `codemode tools <server> [--json]`: lists one server's tools with their parameters, from the cache or by
 * listing the server. Imports no MCP client or runtime: the caller's `lister` decides how servers start.
 * @module
 */
import { pythonAlias } from "../core/python_alias.ts";
import { Policy } from "../core/config/policy.ts";
import { type CatalogDeps, firstSentence, indexedCatalog, terminal } from "./search.ts";
import { escapeControls, escapeDeep, safeJson } from "./_terminal_guard.ts";

/** Options of {@link runTools}. */
export interface ToolsCommandOptions {
  json: boolean;
}

/** Runs `codemode tools`; returns the exit code. */
export async function runTools(
  server: string,
  opts: ToolsCommandOptions,
  deps: CatalogDeps,
): Promise<number> {
  const io = terminal(deps);
  const policy = deps.policy ?? new Policy();
  const refused = policy.allowsServer(server);
  if (!refused.ok) {
    io.err(refused.reason);
    return 1;
  }
  const specs = deps.specs.filter((s) => s.name === server);
  if (!specs.length) {
    io.err(`Unknown server "${server}": run codemode servers to see the configured ones`);
    return 1;
  }
  const catalog = await indexedCatalog(specs, deps, io);
  const [status] = catalog.status();
  if (status.state === "failed") {
    io.err(escapeControls(`Could not list the tools of "${server}": ${status.error}`));
    if (!status.tools) return 1;
  }
  const tools = catalog.full(server).filter((t) => policy.allowsTool(server, t.tool, t.annotations).ok);
  // What the server listed but codemode left out (or kept with a caveat) goes to stderr, even with --json.
  for (const p of escapeDeep(status.problems)) {
    io.err(`tool ${p.tool}: ${p.problem}${p.leftOut ? " (left out)" : ""}`);
  }
  if (opts.json) {
    io.out(safeJson(tools));
    return 0;
  }
  if (!tools.length) {
    io.out(`Server "${server}" has no tools`);
    return 0;
  }
  const width = Math.max(60, deps.columns || process.stdout.columns || 100);
  const callWidth = Math.min(60, Math.floor(width * 0.45));
  // Loaded here, not at the top: it costs ~60 ms and --json never needs it.
  const { default: Table } = await import("cli-table3");
  const table = new Table({
    head: ["tool", "description"].map((h) => io.color.bold(h)),
    colWidths: [callWidth, Math.max(20, width - callWidth - 7)],
    wordWrap: true,
    style: { head: [], border: [] },
  });
  for (const tool of escapeDeep(tools)) {
    const call = tool.signature.replace(tool.alias, io.color.green(tool.alias));
    table.push([call, (tool.addedAt ? "(new) " : "") + firstSentence(tool.description, 200)]);
  }
  io.out(`${io.color.cyan(server)}: ${tools.length} tools, called as mcp_${pythonAlias(server)}.<tool>(...)`);
  io.out(table.toString());
  return 0;
}
