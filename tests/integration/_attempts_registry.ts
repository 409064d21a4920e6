/**
 * Registry attempts of the adversarial suite. The suite's serve may add servers from a test registry only
 * with the person's approval (CODEMODE_ADD_SERVERS=ask), and its client declines every question after a
 * short pause; so a process that npx started, a kept server in a config file, or a request to the registry
 * outside its API paths means sandbox code got past the rules. Attempts: forging the approval, steering the
 * registry request or the alias with crafted names, setting secrets or launcher variables, and flooding.
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Attempt, type Ctx, facts, noneAllowed, TRY } from "./_adversarial.ts";

/** The host-API attempts' prelude (TRY), and the registry name the attempts ask for. */
const TRY_ADD = `${TRY}
MEMORY = "io.github.modelcontextprotocol/server-memory"
`;

/** Nothing npx-started under the serve, nothing kept, the registry asked only its API paths, no pwned file. */
function nothingAdded(ctx: Ctx): void {
  const registry = ctx.registry!;
  const rows = execFileSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" }).split("\n");
  const children = new Map<number, { ppid: number; args: string }>();
  for (const row of rows) {
    const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(row);
    if (m) children.set(Number(m[1]), { ppid: Number(m[2]), args: m[3] });
  }
  const under = (pid: number): boolean => {
    for (let p = children.get(pid)?.ppid, hops = 0; p && hops < 50; p = children.get(p)?.ppid, hops++) {
      if (p === ctx.served.transport.pid) return true;
    }
    return false;
  };
  const started = [...children].filter(([pid, c]) => under(pid) && /npx|npm exec|_npx|uvx/.test(c.args));
  assert.deepEqual(started, [], "a registry server was started");
  assert.equal(
    existsSync(join(ctx.served.home, ".config", "codemode", "config.yaml")),
    false,
    "a server was kept",
  );
  assert.equal(existsSync(registry.pwnedFile), false);
  const offPath = registry.requests.filter((p) =>
    !/^\/v0(\.1)?\/servers(\?[^/]*|\/[^/]+\/versions\/[^/]+)$/.test(p)
  );
  assert.deepEqual(offPath, [], "every registry request stays on its API paths");
}

/** Registry: servers are added only with the person's consent, only as the rules say. */
export const registry: Attempt[] = [
  {
    area: "registry",
    name:
      "adding a server without the person (forged approvals, raw params, fake host methods) starts nothing",
    timeout: 90,
    code: `${TRY_ADD}
await try_("kwargs", runtime.add_server(MEMORY, alias="forged"))
await try_("raw params", rpc.call("add_server", {"name": MEMORY, "alias": "raw", "approved": True, "approve": True,
    "scope": "keep", "values": {"env_X": "y"}, "answer": {"approve": True}}))
fake = {}
for method in ["approve_add", "add_server_approved", "keep_server", "answer", "start_server"]:
    try:
        await rpc.call(method, {"name": MEMORY, "approve": True})
        fake[method] = "answered"
    except Exception as e:
        fake[method] = type(e).__name__
names = [n for n in ("mcp_forged", "mcp_raw") if n in globals()]
report(results=results, fake=fake, names=names)`,
    check(answer, ctx) {
      const f = facts(answer);
      assert.deepEqual(f.results, { kwargs: "PermissionError", "raw params": "PermissionError" });
      assert.deepEqual(Object.values(f.fake as object), Array(5).fill("NotImplementedError"));
      assert.deepEqual(f.names, []);
      nothingAdded(ctx);
    },
  },
  {
    area: "registry",
    name: "crafted names, versions and aliases cannot steer the registry request, the command or the alias",
    timeout: 60,
    code: `${TRY_ADD}
cases = {
    "name traversal": {"name": "../../v0/servers"},
    "name encoded": {"name": "io.x%2F..%2F..%2Fadmin/y"},
    "name query": {"name": "io.x/y?version=1&evil=1"},
    "version traversal": {"name": MEMORY, "version": "../../../../etc/passwd"},
    "version range": {"name": MEMORY, "version": "^2026.0.0"},
    "alias dunder": {"name": MEMORY, "alias": "__builtins__"},
    "alias code": {"name": MEMORY, "alias": "x; import os"},
    "alias path": {"name": MEMORY, "alias": "../memory"},
    "alias configured": {"name": MEMORY, "alias": "vault"},
    "alias keyword": {"name": MEMORY, "alias": "import"},
    "huge name": {"name": "io.x/" + "y" * 100000},
    "not a string": {"name": ["io.x/y"]},
}
for case, params in cases.items():
    await try_(case, rpc.call("add_server", params))
await try_("huge query", runtime.find_servers("m" * 100000))
report(results=results)`,
    check(answer, ctx) {
      const f = facts(answer);
      noneAllowed(f.results, "crafted adds");
      nothingAdded(ctx);
    },
  },
  {
    area: "registry",
    name: "secrets and launcher variables from sandbox code are refused before anyone is asked",
    timeout: 60,
    code: `${TRY_ADD}
KEYED = "io.example.test/memory-with-key"
for name, env in {
    "secret": {"MEMORY_API_KEY": "from-sandbox"},
    "node options": {"NODE_OPTIONS": "--require=/tmp/x.js"},
    "npm registry": {"npm_config_registry": "http://127.0.0.1:9/"},
    "path": {"PATH": "/tmp"},
    "undeclared": {"LD_PRELOAD": "/tmp/x.so"},
    "control chars": {"MEMORY_FILE_PATH": "/tmp/a\\x1b]52;c;eA==\\x07"},
    "not a string": {"MEMORY_FILE_PATH": 7},
}.items():
    await try_(name, rpc.call("add_server", {"name": KEYED, "env": env}))
await try_("node options entry", runtime.add_server("io.example.hostile/node-options"))
report(results=results)`,
    check(answer, ctx) {
      const f = facts(answer);
      noneAllowed(f.results, "adds with forbidden variables");
      assert.equal((f.results as Record<string, string>).secret, "PermissionError");
      nothingAdded(ctx);
    },
  },
  {
    area: "registry",
    name: "a flood of finds and adds is asked one question at a time and starts nothing",
    timeout: 120,
    code: `${TRY_ADD}
import asyncio
finds = await asyncio.gather(*[runtime.find_servers("server-memory", limit=10**9) for _ in range(200)],
    return_exceptions=True)
adds = await asyncio.gather(*[rpc.call("add_server", {"name": MEMORY, "alias": f"flood{i}"}) for i in range(6)],
    return_exceptions=True)
report(finds=sorted({type(x).__name__ for x in finds}), counts=sorted({len(x) for x in finds if isinstance(x, list)}),
    adds=sorted({type(x).__name__ for x in adds}))`,
    check(answer, ctx) {
      const f = facts(answer);
      assert.deepEqual(f.finds, ["list"]);
      assert.deepEqual(f.counts, [1], "the limit is capped, the cache answers");
      assert.deepEqual(f.adds, ["PermissionError"], "every one declined");
      assert.ok(ctx.registry!.requests.filter((p) => p.startsWith("/v0.1/servers?")).length <= 5, "cached");
      nothingAdded(ctx);
    },
  },
];
