/**
 * VS Code: `<workspace>/.vscode/mcp.json` and the user profile's `mcp.json`, servers under top-level
 * `servers`, prompts declared in `inputs` and referenced as `${input:id}`.
 * @module
 */

import { z } from "zod";
import type { DiscoveryContext, DiscoveryPlugin, DiscoveryResult } from "../../core/contracts/discovery.ts";
import {
  appConfigDir,
  describeIssues,
  fileProblem,
  inScopes,
  isRecord,
  jsonServerMap,
  loadJson,
  locate,
  type Location,
  pathFor,
  scopeOf,
} from "./_private.ts";

/** Options for the VS Code plugin. */
export interface VscodeOptions {
  /** Which of VS Code's scopes to read. */
  scopes?: readonly ("user" | "workspace")[];
  /** Application folder name: "Code", "Code - Insiders", "VSCodium". */
  product?: string;
}

/** Reads stable VS Code's user file and the workspace file. */
export const defaults = { scopes: ["user", "workspace"], product: "Code" } satisfies VscodeOptions;

const Inputs = z.array(z.object({ id: z.string(), default: z.string().optional() }).loose());

/** Where VS Code keeps its server lists, lowest precedence first. */
export function vscodeLocations(context: DiscoveryContext, product: string = defaults.product): Location[] {
  const path = pathFor(context.platform);
  return [
    { pattern: path.join(appConfigDir(context, product), "User", "mcp.json"), scope: "user" },
    { pattern: path.join(context.cwd, ".vscode", "mcp.json"), scope: "workspace" },
  ];
}

async function readVscode(file: string, scope: string | undefined): Promise<DiscoveryResult> {
  const { root, diagnostics } = await loadJson(file);
  if (root === undefined) return { servers: [], diagnostics };
  if (!isRecord(root)) {
    const message = `Cannot use "${file}": expected a JSON object at the top; fix the file`;
    return { servers: [], diagnostics: [fileProblem(file, message)] };
  }
  // An input with a default resolves to it, as VS Code pre-fills its prompt; the rest stay for core
  // to report, since codemode cannot prompt.
  const defaultsById = new Map<string, string>();
  const inputs = Inputs.safeParse(root.inputs ?? []);
  if (inputs.success) {
    for (const input of inputs.data) {
      if (input.default !== undefined) defaultsById.set(input.id, input.default);
    }
  } else {
    diagnostics.push({
      severity: "warning",
      file,
      message: `Ignoring "inputs" in "${file}": ${describeIssues(inputs.error)}; fix the list of inputs`,
    });
  }
  const rewrite = (text: string) =>
    text.replace(/\$\{input:([^}]+)\}/g, (whole, id: string) => defaultsById.get(id) ?? whole);
  const result = jsonServerMap(root.servers, { plugin: "vscode", file, scope, prefix: "servers" }, {
    urlKeys: [{ key: "url" }],
    rewrite,
  });
  return { servers: result.servers, diagnostics: [...diagnostics, ...result.diagnostics] };
}

/** Discovers the servers configured in VS Code. */
export function vscode(options: VscodeOptions = {}): DiscoveryPlugin {
  const { scopes, product } = { ...defaults, ...options };
  const locations = (context: DiscoveryContext) => inScopes(vscodeLocations(context, product), scopes);
  return {
    name: "vscode",
    candidates: (context) => locate(locations(context), context.platform),
    read: (file, context) => readVscode(file, scopeOf(vscodeLocations(context, product), file)),
  };
}
