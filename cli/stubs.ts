/**
 * `codemode stubs [server...] [--out DIR]`: the Python stubs of configured servers' tools (the same text
 * `await runtime.stubs(server)` gives sandbox code), printed, or written as `DIR/mcp/servers/<alias>.pyi`
 * for editors and type checkers. Reads the tool-doc cache; servers missing from it are listed first.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pythonAlias } from "../core/python_alias.ts";
import { Policy } from "../core/config/policy.ts";
import { serverStub } from "../core/catalog/stubs.ts";
import { type CatalogDeps, indexedCatalog, terminal } from "./search.ts";
import { cliConfig } from "./_config.ts";
import { catalogDeps } from "./search_command.ts";

/** Options of {@link runStubs}. */
export interface StubsCommandOptions {
  /** Write `mcp/servers/<alias>.pyi` (and the package files) under this directory instead of printing. */
  out?: string;
}

/** `codemode stubs`, wired to the settings and discovery of this process. */
export async function stubs(servers: string[], opts: StubsCommandOptions): Promise<number> {
  const config = await cliConfig();
  try {
    return await runStubs(servers, opts, catalogDeps(config));
  } finally {
    await config.close();
  }
}

/** Runs `codemode stubs`; returns the exit code (1 when a server is unknown, refused or could not be listed). */
export async function runStubs(
  servers: string[],
  opts: StubsCommandOptions,
  deps: CatalogDeps,
): Promise<number> {
  const io = terminal(deps);
  const policy = deps.policy ?? new Policy();
  const allowed = deps.specs.filter((s) => policy.allowsServer(s.name).ok);
  let failed = false;
  for (const name of servers) {
    const verdict = policy.allowsServer(name);
    if (!verdict.ok) io.err(verdict.reason);
    else if (!allowed.some((s) => s.name === name || pythonAlias(s.name) === name)) {
      io.err(`Unknown server "${name}": run codemode servers to see the configured ones`);
    } else continue;
    failed = true;
  }
  const specs = servers.length
    ? allowed.filter((s) => servers.includes(s.name) || servers.includes(pythonAlias(s.name)))
    : allowed;
  if (!specs.length) {
    if (!failed) io.err("No MCP server is configured: run codemode servers to see where codemode looks");
    return 1;
  }
  const catalog = await indexedCatalog(specs, deps, io);
  const modules: [string, string][] = [];
  for (const status of catalog.status()) {
    if (status.state === "failed" && !status.tools) {
      io.err(`Could not list the tools of "${status.server}": ${status.error}`);
      failed = true;
      continue;
    }
    const docs = catalog.docs(status.server).filter((d) =>
      policy.allowsTool(d.server, d.tool, d.annotations).ok
    );
    modules.push([pythonAlias(status.server), serverStub(status.server, docs)]);
  }
  if (!opts.out) {
    for (const [alias, text] of modules) {
      io.out(modules.length > 1 ? `# ==> mcp/servers/${alias}.pyi <==\n${text}` : text.replace(/\n$/, ""));
    }
    return failed ? 1 : 0;
  }
  const dir = join(opts.out, "mcp", "servers");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(opts.out, "mcp", "__init__.pyi"),
    '"""codemode\'s in-sandbox API (see `await runtime.stubs(server)` for one server\'s tools)."""\n' +
      "from typing import Any\n\nfrom . import servers as servers\n\nruntime: Any\n",
  );
  writeFileSync(
    join(dir, "__init__.pyi"),
    `"""One module per configured MCP server: \`from mcp.servers.<alias> import <tool>\`."""\n` +
      modules.map(([alias]) => `from . import ${alias} as ${alias}\n`).join(""),
  );
  for (const [alias, text] of modules) writeFileSync(join(dir, `${alias}.pyi`), text);
  io.err(
    `Wrote the stubs of ${modules.length} server(s) to ${dir}; point your editor's stub path at ${opts.out} ` +
      "(e.g. mypy_path) and write `import mcp.servers.<alias> as mcp_<alias>` to type mcp_<alias>",
  );
  return failed ? 1 : 0;
}
