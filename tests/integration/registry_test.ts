/**
 * Finding and adding servers from an MCP registry, end to end: a real `codemode serve` (podman sandbox)
 * asks a real registry (tests/integration/_registry.ts, serving tests/testdata/registry/), an SDK client
 * with elicitation answers the questions, and the added servers are the reference servers from npm, run
 * with `npx -y` from npm's cache. Approved: the new server is callable in the same run and searchable;
 * declined, off, denied by policy, hostile entries and secrets from sandbox code: refused with the reason,
 * nobody asked where the rules say so, and nothing spawned (checked in the process table). A registry that
 * is down is a clear error and the serve keeps serving. Over HTTP, an added server is its session's alone.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { assertStillServing, fakeHome, ROOT, serve, type Served } from "./_serve.ts";
import { connectHttp, eventually, startHttpServe } from "./_serve_http.ts";
import { askingClient, type Reply } from "./_approvals.ts";
import { startRegistry, type TestRegistry } from "./_registry.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { podman } from "../../plugins/runtime/podman.ts";

const usable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED registry tests: podman or image ${TEST_IMAGE} missing`);
const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });
const py = (text: string) => JSON.stringify(text);
const SECRET = "memory-api-key-5d1e7f";
const MEMORY = "io.github.modelcontextprotocol/server-memory";
const WITH_KEY = "io.example.test/memory-with-key";

/** npm's cache, so `npx -y` in a throwaway HOME finds the packages `npm install` fetched. */
const NPM_CACHE = (() => {
  try {
    return execFileSync("npm", ["config", "get", "cache"], { encoding: "utf8" }).trim();
  } catch {
    return join(process.env.HOME ?? "/root", ".npm");
  }
})();

/** A HOME with server-everything and server-memory configured, whose npm uses the machine's cache. */
function registryHome(): string {
  const home = fakeHome();
  writeFileSync(join(home, ".npmrc"), `cache=${NPM_CACHE}\n`);
  return home;
}

/** The processes under `pid`, with their command lines. */
function processesUnder(pid: number): { pid: number; args: string }[] {
  const rows = execFileSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" }).split("\n").flatMap(
    (line) => {
      const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
      return m ? [{ pid: Number(m[1]), ppid: Number(m[2]), args: m[3] }] : [];
    },
  );
  const found: { pid: number; args: string }[] = [];
  const parents = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const row of rows) {
      if (parents.has(row.ppid) && !parents.has(row.pid)) {
        parents.add(row.pid);
        found.push({ pid: row.pid, args: row.args });
        grew = true;
      }
    }
  }
  return found;
}

/** Processes under the serve that `npx` started for a registry package. */
const npxUnder = (pid: number) => processesUnder(pid).filter((p) => /npx|npm exec|_npx/.test(p.args));

/** Approves with `scope` and the form values given. */
const approveWith = (values: Record<string, string> = {}, scope = "session"): Reply => () => ({
  action: "accept",
  content: { approve: true, scope, ...values },
});

let shared:
  | Promise<{ s: Served; registry: TestRegistry; asking: ReturnType<typeof askingClient> }>
  | undefined;
/** One serve for the tests below: adding asks, server-everything's package is denied. */
function world() {
  shared ??= (async () => {
    const registry = await startRegistry();
    const asking = askingClient("registry-tests", approveWith());
    const s = await serve(
      {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_REGISTRY_URL: registry.url,
        CODEMODE_ADD_SERVERS: "ask",
        CODEMODE_ADD_DENY: "npm:@modelcontextprotocol/server-everything",
      },
      registryHome(),
      asking.client,
    ).catch(async (error) => {
      await registry.close();
      throw error;
    });
    return { s, registry, asking };
  })();
  return shared;
}

test("an approved add is callable in the same run, searchable, listed, and its secret stays on the host", async () => {
  const { s, asking } = await world();
  const graph = join(s.home, "added-graph.jsonl");
  asking.answer = approveWith({ env_MEMORY_API_KEY: SECRET });
  const asked = asking.questions.length;
  const r = await s.run(
    `from mcp import runtime
found = {f["name"]: f for f in await runtime.find_servers("memory")}
info = await runtime.add_server(${py(WITH_KEY)}, alias="mem", env={"MEMORY_FILE_PATH": ${py(graph)}})
await mcp_mem.create_entities(entities=[{"name": "registry-test", "entityType": "test", "observations": ["added"]}])
entities = [e["name"] for e in (await mcp_mem.read_graph())["entities"]]
hits = {(h["server"], h["tool"]) for h in await runtime.search_tool_docs("create entities knowledge graph", limit=10)}
meta = {m["name"]: [t["name"] for t in m["tools"]] for m in runtime.list_loaded_server_metadata()}
(sorted(found), found[${py(WITH_KEY)}]["env"], found[${py(WITH_KEY)}]["allowed"], info["alias"], info["name"],
 info["version"], "create_entities" in [t["name"] for t in info["tools"]], entities, ("mem", "create_entities") in hits,
 "create_entities" in meta["mem"], "mem" in runtime.discovered_servers(), "echo" in meta["everything"])`,
    120,
  );
  assert.equal(r.isError, false, r.text);
  assert.equal(
    r.structured.value,
    `(['${WITH_KEY}', '${MEMORY}'], [{'name': 'MEMORY_FILE_PATH', 'required': False, 'secret': False}, ` +
      `{'name': 'MEMORY_API_KEY', 'required': True, 'secret': True}], True, 'mem', '${WITH_KEY}', '2026.8.31', ` +
      "True, ['registry-test'], True, True, True, True)",
  );
  assert.match(
    readFileSync(graph, "utf8"),
    /registry-test/,
    "MEMORY_FILE_PATH from sandbox code reached the server",
  );
  assert.equal(asking.questions.length, asked + 1, "one question");
  const message = asking.questions.at(-1)!.question.message;
  assert.match(
    message,
    /wants to add the MCP server "io\.example\.test\/memory-with-key" \(version 2026\.8\.31\)/,
  );
  assert.match(message, /It runs: npx -y @modelcontextprotocol\/server-memory@2026\.8\.31\n/);
  assert.match(message, /MEMORY_FILE_PATH \(set by sandbox code\), MEMORY_API_KEY \(secret, required/);
  assert.doesNotMatch(message, /added-graph/, "values are never shown, not even those sandbox code set");
  assert.doesNotMatch(JSON.stringify(asking.questions.at(-1)!.question), new RegExp(SECRET));
  assert.doesNotMatch(r.text + JSON.stringify(r.structured), new RegExp(SECRET));
  // The secret reached the server's environment, and only there.
  const server = npxUnder(s.transport.pid!).find((p) => /server-memory/.test(p.args));
  assert.ok(server, "the added server runs under the serve");
  const environ = processesUnder(server.pid).concat(server).map((p) => {
    try {
      return readFileSync(`/proc/${p.pid}/environ`, "utf8");
    } catch {
      return "";
    }
  }).join("\n");
  assert.match(environ, new RegExp(`MEMORY_API_KEY=${SECRET}`));

  // A sandbox that is lost and started again knows the session's added server from its first frame.
  await s.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
  const again = await s.run(`[e["name"] for e in (await mcp_mem.read_graph())["entities"]]`, 60);
  assert.equal(again.structured.value, "['registry-test']", again.text);

  // The pre-run check knows the session's added server: a misspelt tool of it stops the run before the
  // write above it, while the same program that adds a server (the first run) was never a finding.
  const checked = await s.run(
    `await mcp_mem.create_entities(entities=[{"name": "never", "entityType": "t", "observations": []}])
await mcp_mem.read_grahp()`,
  );
  assert.equal(checked.isError, true);
  const findings = checked.structured.check as { kind: string; line: number; fix: string }[];
  assert.deepEqual(findings.map((f) => `${f.kind} ${f.line}`), ["unknown-tool 2"], checked.text);
  assert.match(findings[0].fix, /mcp_mem\.read_graph\(/);
  assert.doesNotMatch(readFileSync(graph, "utf8"), /never/, "nothing ran");
  // Its stubs and help() come from the same generator as the configured servers'.
  const typed = await s.run(`import inspect
from mcp import runtime
("async def create_entities(" in await runtime.stubs("mem"), str(inspect.signature(mcp_mem.create_entities)))`);
  assert.match(String(typed.structured.value), /^\(True, '\(\*, entities: list\[/, typed.text);

  const removed = await s.run(`from mcp import runtime
r = await runtime.remove_server("mem")
try:
    mcp_mem
    gone = False
except NameError:
    gone = True
(r, gone, "mem" in runtime.discovered_servers())`);
  assert.equal(removed.structured.value, `({'alias': 'mem', 'name': '${WITH_KEY}'}, True, False)`);
  assert.ok(
    await eventually(() => Promise.resolve(!npxUnder(s.transport.pid!).length)),
    "the server stopped",
  );
});

test("a declined add raises PermissionError and starts nothing", async () => {
  const { s, asking } = await world();
  asking.answer = () => ({ action: "decline" });
  const r = await s.run(`from mcp import runtime
try:
    await runtime.add_server(${py(MEMORY)})
    out = "added"
except PermissionError as e:
    out = str(e)
out`);
  assert.equal(
    r.structured.value,
    `'Adding the MCP server "${MEMORY}" declined by the user'`,
  );
  assert.deepEqual(npxUnder(s.transport.pid!), []);
});

test("refused before any question: a denied package, hostile entries, a secret from sandbox code", async () => {
  const { s, registry, asking } = await world();
  const asked = asking.questions.length;
  const r = await s.run(`from mcp import runtime
out = {}
for name, kwargs in [
    ("io.github.modelcontextprotocol/server-everything", {}),
    ("io.example.hostile/shell-metacharacters", {}),
    ("io.example.hostile/leading-dash", {}),
    ("io.example.hostile/oci-image", {}),
    ("io.example.hostile/missing-version", {}),
    ("io.example.hostile/node-options", {}),
    ("io.example.hostile/huge-description", {}),
    ("io.example.hostile/no-version-at-all", {}),
    (${py(WITH_KEY)}, {"env": {"MEMORY_API_KEY": "from-sandbox"}}),
    (${py(MEMORY)}, {"alias": "memory"}),
]:
    try:
        await runtime.add_server(name, **kwargs)
        out[name] = "added"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
found = {f["name"]: (f["allowed"], f.get("why")) for f in await runtime.find_servers("hostile")}
(out, found)`);
  assert.equal(r.isError, false, r.text);
  const host = new URL(registry.url).host;
  const value = String(r.structured.value);
  for (
    const expected of [
      `PermissionError: "io.github.modelcontextprotocol/server-everything" is denied by policy (CODEMODE_ADD_DENY has ` +
      `"npm:@modelcontextprotocol/server-everything")`,
      `ValueError: codemode will not add "io.example.hostile/shell-metacharacters": the npm package "x; touch`,
      `ValueError: codemode will not add "io.example.hostile/leading-dash": the npm package "--call=touch`,
      `ValueError: codemode will not add "io.example.hostile/oci-image": it is an oci image`,
      `the npm package "@modelcontextprotocol/server-memory" has no version, and codemode runs only exact, pinned`,
      `it sets the environment variable "NODE_OPTIONS", which would change how its launcher runs`,
      `ValueError: The MCP registry at ${host} sent an entry for "io.example.hostile/huge-description" that codemode ` +
      "will not use: not a valid server.json (description: Too big",
      `"io.example.hostile/no-version-at-all" that codemode will not use: not a valid server.json (version:`,
      "PermissionError: MEMORY_API_KEY is a secret: only the user can give its value (codemode asks for it), never " +
      "sandbox code",
      `ValueError: The alias "memory" is taken by the server "memory"; pass alias="..." to add_server`,
    ]
  ) {
    assert.ok(
      value.includes(expected.replaceAll("'", "\\'")),
      `${expected}\nnot in\n${value.slice(0, 3000)}`,
    );
  }
  assert.doesNotMatch(value, /'added'/);
  assert.match(
    value,
    /'io\.example\.hostile\/oci-image': \(False, 'codemode will not run it: it is an oci image/,
  );
  assert.equal(asking.questions.length, asked, "nobody was asked");
  assert.deepEqual(npxUnder(s.transport.pid!), [], "nothing was spawned");
  assert.equal(existsSync(registry.pwnedFile), false);
  // The oversized and the malformed entry were left out of the search, with a note saying so.
  const notes = (r.structured.notes as string[] | undefined) ?? [];
  assert.ok(
    notes.some((n) =>
      /find_servers left out 2 entries from .*huge-description \(not a valid server\.json/.test(n)
    ),
    JSON.stringify(notes),
  );
});

test("a remote server gets its header from the form, never from sandbox code; keep writes codemode's config", async () => {
  const { s, registry, asking } = await world();
  asking.answer = approveWith({ header_X_Api_Key: registry.apiKey }, "keep");
  const r = await s.run(
    `from mcp import runtime
info = await runtime.add_server("io.example.test/remote-echo")
(info["alias"], await mcp_remote_echo.echo(message="hi"))`,
    60,
  );
  assert.equal(r.isError, false, r.text);
  assert.equal(r.structured.value, "('remote_echo', 'echo: hi')");
  assert.ok(registry.apiKeys.includes(registry.apiKey), "the key reached the remote server");
  assert.doesNotMatch(r.text + JSON.stringify(r.structured), new RegExp(registry.apiKey));
  assert.match(asking.questions.at(-1)!.question.message, /It connects to: http:\/\/127\.0\.0\.1:\d+\/mcp\n/);
  // This serve has no config file, so the user file under its HOME is made (0600) and names the registry entry.
  const kept = join(s.home, ".config", "codemode", "config.yaml");
  assert.ok((r.structured.notes as string[]).some((n) => n.includes(`kept as "remote_echo" in ${kept}`)));
  const text = readFileSync(kept, "utf8");
  assert.match(
    text,
    /servers:\n {2}remote_echo:\n {4}url: http:\/\/127\.0\.0\.1:\d+\/mcp\n {4}headers:\n {6}X-Api-Key: /,
  );
  assert.match(text, /registry:\n {6}name: io\.example\.test\/remote-echo\n {6}version: 1\.0\.0\n/);
  assert.equal(statSync(kept).mode & 0o777, 0o600);
  // `codemode servers` shows it as kept from the registry, and as added by the running serve's session.
  const listed = JSON.parse(execFileSync(
    join(ROOT, "node_modules/.bin/deno"),
    ["run", "-A", "--quiet", join(ROOT, "cli.ts"), "servers", "--json"],
    {
      cwd: s.home,
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", HOME: s.home, CODEMODE_STATE_DIR: join(s.home, "state") },
    },
  ));
  const row = listed.servers.find((x: { name: string }) => x.name === "remote_echo");
  assert.deepEqual([row.source.plugin, row.source.file, row.registry.name], [
    "codemode",
    kept,
    "io.example.test/remote-echo",
  ]);
  const live = listed.added.find((x: { alias: string }) => x.alias === "remote_echo");
  assert.deepEqual([live.name, live.state, live.tools, live.kept], [
    "io.example.test/remote-echo",
    "ready",
    1,
    kept,
  ]);
  assert.doesNotMatch(
    JSON.stringify(listed.added),
    new RegExp(registry.apiKey),
    "header values never published",
  );
});

test("a registry that is down is a clear error naming its host, and the serve keeps serving", async () => {
  const { s, registry } = await world();
  registry.mode = "error";
  try {
    const r = await s.run(`from mcp import runtime
try:
    await runtime.find_servers("nothing-cached-for-this")
except ConnectionError as e:
    out = (isinstance(e, runtime.MCPError), str(e))
out`);
    assert.equal(
      r.structured.value,
      `(True, 'The MCP registry at ${new URL(registry.url).host} answered 503 Service Unavailable')`,
    );
  } finally {
    registry.mode = "ok";
  }
  await assertStillServing(s);
});

test("with CODEMODE_ADD_SERVERS off, find works and add is refused without a question", async () => {
  const registry = await startRegistry();
  const asking = askingClient("registry-off", approveWith());
  const s = await serve(
    { CODEMODE_RUNTIME: "podman", CODEMODE_REGISTRY_URL: registry.url },
    registryHome(),
    asking.client,
  );
  try {
    const r = await s.run(`from mcp import runtime
found = await runtime.find_servers("server-memory")
try:
    await runtime.add_server(${py(MEMORY)})
    out = "added"
except PermissionError as e:
    out = str(e)
([(f["allowed"], f["why"]) for f in found], out)`);
    const off =
      'Adding servers is off (CODEMODE_ADD_SERVERS is "off"); the user can set CODEMODE_ADD_SERVERS=ask to be ' +
      "asked";
    assert.equal(r.structured.value, `([(False, '${off}')], '${off}')`);
    assert.equal(asking.questions.length, 0);
    assert.deepEqual(npxUnder(s.transport.pid!), []);
  } finally {
    await s.close();
    await registry.close();
  }
});

test("over serve --http a server added in one session is invisible to another, and stops with its session", async () => {
  const registry = await startRegistry();
  const home = registryHome();
  mkdirSync(join(home, "state"), { recursive: true });
  const http = await startHttpServe(home, {
    CODEMODE_RUNTIME: "podman",
    CODEMODE_REGISTRY_URL: registry.url,
    CODEMODE_ADD_SERVERS: "ask",
  });
  const a = askingClient("session-a", approveWith());
  const b = askingClient("session-b", approveWith());
  try {
    const [ca, cb] = [await connectHttp(http.url, {}, a.client), await connectHttp(http.url, {}, b.client)];
    const added = await ca.run(
      `from mcp import runtime
(await runtime.add_server(${py(MEMORY)}, alias="mine"))["alias"]`,
      120,
    );
    assert.equal(added.value, "'mine'", added.text);
    assert.ok(npxUnder(http.pid).length > 0);
    const other = await cb.run(`from mcp import runtime
out = []
try:
    mcp_mine
except NameError:
    out.append("no global")
for call in (runtime.remove_server("mine"), runtime.call_tool("mine", "read_graph"), runtime.list_tools("mine")):
    try:
        await call
    except Exception as e:
        out.append(type(e).__name__)
hits = [h["server"] for h in await runtime.search_tool_docs("read graph", limit=20)]
(out, "mine" in hits, "mine" in runtime.discovered_servers())`);
    assert.equal(
      other.value,
      "(['no global', 'KeyError', 'KeyError', 'KeyError'], False, False)",
      other.text,
    );
    assert.equal(b.questions.length, 0);
    const own = await ca.run(
      `"mine" in [h["server"] for h in await runtime.search_tool_docs("read graph", limit=20)]`,
    );
    assert.equal(own.value, "True");
    await ca.end();
    assert.ok(
      await eventually(() => Promise.resolve(!npxUnder(http.pid).length)),
      "stopped with its session",
    );
    await cb.end();
  } finally {
    await http.stop();
    await registry.close();
  }
});

test("closing the shared serve", async () => {
  if (!shared) return;
  const { s, registry } = await shared;
  await s.close();
  await registry.close();
});
