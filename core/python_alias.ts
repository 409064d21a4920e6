/**
 * How server and tool names become Python identifiers in the sandbox (`mcp_<alias>.<tool alias>`): the
 * one naming rule that config, the catalog, the sandbox API and the MCP face all share.
 * @module
 */

/** Turns a server or tool name into a Python identifier the way the bridge did: non-identifier chars -> `_`. */
export function pythonAlias(name: string): string {
  let alias = name.replace(/[^A-Za-z0-9_]/g, "_");
  if (/^[0-9]/.test(alias)) alias = `_${alias}`;
  return alias || "_";
}
