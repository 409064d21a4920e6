/**
 * The registry methods with a registry answering from tests/testdata/registry (through an injected fetch)
 * and nothing that can start: find_servers' result shape and notes, and every add that must be refused
 * before anything starts or anyone is asked: the registry off, adding off, no one to ask, allow mode when a
 * value only the user can give is needed, bad parameters; remove_server of a configured server. And the
 * order the capabilities text gives the model.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AddPolicy } from "../../core/config/add_policy.ts";
import { Policy } from "../../core/config/policy.ts";
import { AddedServers } from "../../core/host_api/added_servers.ts";
import { type RegistryApiDeps, registryMethods } from "../../core/host_api/registry_api.ts";
import type { RpcContext } from "../../core/host_api/rpc.ts";
import { RegistryClient } from "../../core/registry/client.ts";
import type { ApprovalRequest } from "../../core/host_api/approvals.ts";
import { capabilityText } from "../../core/serve/capabilities.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const entries = readdirSync(join(ROOT, "tests/testdata/registry")).filter((f) => f.endsWith(".json")).map((
  f,
) =>
  JSON.parse(
    readFileSync(join(ROOT, "tests/testdata/registry", f), "utf8").replaceAll(
      "${MCP_URL}",
      "https://m.example/mcp",
    ),
  )
);
const fakeFetch: typeof fetch = (input) => {
  const url = new URL(String(input));
  const one = /^\/v0\.1\/servers\/([^/]+)\/versions\/([^/]+)$/.exec(url.pathname);
  if (one) {
    const found = entries.find((e) => e.name === decodeURIComponent(one[1]));
    return Promise.resolve(found ? Response.json({ server: found }) : new Response("", { status: 404 }));
  }
  if (url.pathname !== "/v0.1/servers") return Promise.resolve(new Response("", { status: 404 }));
  const search = url.searchParams.get("search") ?? "";
  return Promise.resolve(
    Response.json({ servers: entries.filter((e) => e.name.includes(search)).map((server) => ({ server })) }),
  );
};

function methods(deps: Partial<RegistryApiDeps> = {}) {
  const configured = {
    pool: {
      names: () => ["memory"],
      spec: () => undefined,
      listTools: () => Promise.reject(new Error("no")),
      callTool: () => Promise.reject(new Error("no")),
    },
    docs: { search: () => [], docs: () => [] },
  };
  return registryMethods({
    registry: new RegistryClient("https://registry.example", { fetch: fakeFetch }),
    addPolicy: new AddPolicy("ask"),
    policy: new Policy(),
    servers: new AddedServers({ configured, stateDir: Deno.makeTempDirSync() }),
    configured: () => ["memory"],
    tools: { uvx: false },
    askReason: 'CODEMODE_ADD_SERVERS is "ask"',
    ...deps,
  });
}

function context(
  approve?: RpcContext["approve"],
): RpcContext & { notes: string[]; asked: ApprovalRequest[] } {
  const notes: string[] = [];
  const asked: ApprovalRequest[] = [];
  return {
    session: "s",
    signal: new AbortController().signal,
    notes,
    asked,
    note: (text) => void notes.push(text),
    ...(approve ? { approve: (r: ApprovalRequest) => (asked.push(r), approve(r)) } : {}),
  };
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error, "expected a refusal");
  return `${error.pythonType}: ${error.message}`;
}

Deno.test("find_servers returns each entry with how it would run and whether it may be added, and notes what it left out", async () => {
  const ctx = context();
  const found = await methods({ addPolicy: new AddPolicy("ask", ["*"], ["io.example.hostile/*"]) })
    .find_servers(
      { query: "io.", limit: 50 },
      ctx,
    ) as Record<string, unknown>[];
  const byName = Object.fromEntries(found.map((f) => [f.name, f]));
  assert.deepEqual(byName["io.example.test/memory-with-key"], {
    name: "io.example.test/memory-with-key",
    description: "server-memory, published again with a variable to set and a secret only the user may give",
    version: "2026.8.31",
    run: { type: "npm", command: ["npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31"] },
    env: [
      { name: "MEMORY_FILE_PATH", required: false, secret: false },
      { name: "MEMORY_API_KEY", required: true, secret: true },
    ],
    allowed: true,
  });
  assert.deepEqual(byName["io.example.test/remote-echo"].run, {
    type: "remote",
    url: "https://m.example/mcp",
  });
  assert.deepEqual(byName["io.example.hostile/oci-image"].run, {
    type: "oci",
    image: "docker.io/example/server:1.0.0",
  });
  assert.match(
    String(byName["io.example.hostile/oci-image"].why),
    /^codemode will not run it: it is an oci image/,
  );
  assert.match(String(byName["io.example.hostile/missing-version"].why), /has no version/);
  assert.deepEqual(byName["io.example.hostile/missing-version"].run, { type: "npm" });
  assert.equal(byName["io.example.hostile/no-version-at-all"], undefined);
  assert.deepEqual(ctx.notes, [
    "find_servers left out 1 entry from registry.example: io.example.hostile/no-version-at-all (not a valid " +
    "server.json (version: Invalid input: expected string, received undefined))",
  ]);
  const off = await methods({ addPolicy: new AddPolicy("off") }).find_servers(
    { query: "memory" },
    context(),
  ) as {
    allowed: boolean;
    why: string;
  }[];
  assert.ok(off.every((f) => !f.allowed && /Adding servers is off/.test(f.why)));
  assert.equal(
    await refusal(methods().find_servers({ query: "" }, context())),
    "ValueError: find_servers needs a query of 1 to 200 characters",
  );
});

Deno.test("adds refused before anything starts or anyone is asked", async () => {
  const never = () => Promise.reject(new Error("nobody may be asked"));
  const name = "io.github.modelcontextprotocol/server-memory";
  assert.equal(
    await refusal(methods({ registry: undefined }).add_server({ name }, context(never))),
    "PermissionError: The MCP registry is off here (CODEMODE_REGISTRY_URL=off)",
  );
  assert.match(
    await refusal(methods({ addPolicy: new AddPolicy("off") }).add_server({ name }, context(never))),
    /^PermissionError: Adding servers is off/,
  );
  assert.match(
    await refusal(
      methods({ policy: new Policy({ denyServers: ["server_*"] }) }).add_server({ name }, context(never)),
    ),
    /^PermissionError: Server "server_memory" is denied by policy \(CODEMODE_DENY_SERVERS has "server_\*"\)/,
  );
  assert.equal(
    await refusal(
      methods().add_server(
        { name: "io.example.test/memory-with-key", env: { UNDECLARED: "x" } },
        context(never),
      ),
    ),
    'ValueError: The entry declares no environment variable "UNDECLARED"',
  );
  assert.equal(
    await refusal(methods().add_server({ name, alias: "class" }, context(never))),
    'ValueError: "class" cannot be an alias: use a Python identifier of up to 64 characters',
  );
  assert.match(
    await refusal(methods().add_server({ name: "io.x/none" }, context(never))),
    /^KeyError: The MCP registry at registry\.example has no server "io\.x\/none"/,
  );
  // allow mode asks nobody, so an entry that needs a value only the user can give is refused.
  assert.match(
    await refusal(
      methods({ addPolicy: new AddPolicy("allow") }).add_server(
        { name: "io.example.test/memory-with-key" },
        context(never),
      ),
    ),
    /^PermissionError: "io\.example\.test\/memory-with-key" needs values only the user can give \(MEMORY_API_KEY\)/,
  );
  // ask mode with nobody to ask, and a declined question: refused, nothing started.
  assert.match(
    await refusal(methods().add_server({ name }, context())),
    /needs the user's approval, and nobody can be asked here/,
  );
  const declined = context(() =>
    Promise.resolve({ approved: false, outcome: "declined", message: "no thanks" })
  );
  const deps = methods();
  assert.equal(await refusal(deps.add_server({ name }, declined)), "PermissionError: no thanks");
  assert.equal(declined.asked.length, 1);
  assert.equal(declined.asked[0].kind, "add_server");
  // Approved without the required secret: refused, still nothing started.
  const empty = context(() =>
    Promise.resolve({ approved: true, outcome: "approved", scope: "session", values: {} })
  );
  assert.equal(
    await refusal(deps.add_server({ name: "io.example.test/memory-with-key" }, empty)),
    'PermissionError: Adding "io.example.test/memory-with-key" did not go ahead: the variable MEMORY_API_KEY is ' +
      "required, and no value was given",
  );
  assert.equal(
    await refusal(deps.remove_server({ alias: "memory" }, context())),
    '"memory" is a configured server; remove_server stops only servers this session added'.replace(
      /^/,
      "PermissionError: ",
    ),
  );
  assert.equal(
    await refusal(deps.remove_server({ alias: "nope" }, context())),
    'KeyError: This session added no server "nope"; added: none',
  );
});

Deno.test("the capabilities text gives the model the order: configured tools, then the registry, then adding", () => {
  const text = (registry?: { find: boolean; add: "off" | "ask" | "allow" }) =>
    capabilityText([], undefined, undefined, undefined, registry);
  assert.doesNotMatch(text(), /find_servers/);
  assert.doesNotMatch(text({ find: false, add: "off" }), /find_servers/, "the registry is off");
  const ask = text({ find: true, add: "ask" });
  assert.match(ask, /## More servers \(the MCP registry\)\n1\. Search the configured tools first/);
  assert.match(ask, /2\. Only when none fits: `await runtime\.find_servers/);
  assert.match(
    ask,
    /3\. `info = await runtime\.add_server\(name, alias=None\)` asks the user, then starts it/,
  );
  assert.match(text({ find: true, add: "off" }), /3\. Adding servers is off here: tell the user/);
});
