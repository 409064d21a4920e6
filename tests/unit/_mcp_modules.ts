/**
 * Test helper: runs a program with the host's python3 against the sandbox's own `mcp` modules (only those
 * that need no running kernel: the `ast` passes), loaded from sandbox/source.ts as the sandbox loads them.
 * @module
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { MODULES } from "../../sandbox/source.ts";

const LOADER = `
import json, sys, types
given = json.loads(sys.stdin.read())
package = types.ModuleType("mcp")
package.__path__ = []
sys.modules["mcp"] = package
for name in given["modules"]:
    module = types.ModuleType(name)
    module.__package__ = "mcp"
    sys.modules[name] = module
    setattr(package, name.split(".")[1], module)
    exec(compile(given["sources"][name], "<" + name + ">", "exec"), module.__dict__)
INPUT = given["input"]
exec(compile(given["program"], "<test>", "exec"))
`;

/**
 * Runs `program` (which reads `INPUT` and prints JSON) with the named `mcp.*` modules importable;
 * returns what it printed, parsed.
 */
export function withMcpModules(modules: string[], program: string, input: unknown): unknown {
  const run = spawnSync("python3", ["-I", "-c", LOADER], {
    input: JSON.stringify({ modules, sources: MODULES, program, input }),
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout);
}
