/**
 * The policy end to end: a real `codemode serve` (stdio and --http) reading codemode.yaml and the
 * environment, podman sandboxes, server-everything and server-memory from npm. Denied servers and tools
 * are invisible and refused, read-only mode, the per-run tool-call, output and wall-time limits, the
 * session and runs-at-once caps with concurrent clients, and a malformed config file. Every call is
 * answered, no secret shows up and no sandbox outlives its serve.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakeHome, ROOT, serve, type Served, SERVER_SECRET } from "./_serve.ts";
import { connectHttp, containersLabelled, eventually, startHttpServe } from "./_serve_http.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { LABELS } from "../../core/sandbox/session_manager.ts";
import { podman } from "../../plugins/runtime/podman.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED policy suite: podman or image ${TEST_IMAGE} missing`);

const MEMORY_JS = join(ROOT, "node_modules/@modelcontextprotocol/server-memory/dist/index.js");

/** A HOME with codemode.yaml, server-everything, and a server-memory that leaves a marker when it starts. */
function homeWith(config: string): { home: string; memoryFile: string; memoryStarted: () => boolean } {
  const scratch = mkdtempSync(join(tmpdir(), "codemode-policy-"));
  const marker = join(scratch, "memory-started");
  const memoryFile = join(scratch, "memory.jsonl");
  const home = fakeHome({
    memory: {
      command: "sh",
      args: ["-c", `touch "${marker}"; exec node "${MEMORY_JS}"`],
      env: { MEMORY_FILE_PATH: memoryFile },
    },
  });
  writeFileSync(join(home, "codemode.yaml"), config);
  return { home, memoryFile, memoryStarted: () => existsSync(marker) };
}

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });

/** Runs `body` against a stdio serve, then checks it left no sandbox behind. */
async function withServe(
  env: Record<string, string>,
  home: string,
  body: (s: Served) => Promise<void>,
): Promise<void> {
  const s = await serve({ CODEMODE_RUNTIME: "podman", ...env }, home);
  const pid = s.transport.pid;
  try {
    await body(s);
  } finally {
    await s.close();
  }
  assert.ok(
    await eventually(async () => (await containersLabelled(LABELS.owner, pid!)).length === 0),
    "no sandbox outlives its serve",
  );
}

/** The value of a run that must succeed, as the repr Python printed. */
async function value(s: Served, code: string, timeout?: number): Promise<string> {
  const r = await s.run(code, timeout);
  assert.equal(r.isError, false, r.text);
  assert.ok(!r.text.includes(SERVER_SECRET), "no server secret in a result");
  return String(r.structured.value);
}

test("denied servers and tools are invisible to sandbox code, refused by name, and never started", async () => {
  const { home, memoryStarted } = homeWith(
    'denyServers: [memory]\ndenyTools: ["everything/get-env", "toggle-*"]\n',
  );
  const file = join(home, "codemode.yaml");
  await withServe({ CODEMODE_TIMEOUT: "30" }, home, async (s) => {
    assert.equal(
      await value(
        s,
        "from mcp import runtime\n(runtime.discovered_servers(), await runtime.list_servers())",
      ),
      "(('everything',), ('everything',))",
    );
    assert.equal(await value(s, "'mcp_memory' in globals(), 'memory' in mcp_servers"), "(False, False)");
    const caps = await s.client.readResource({ uri: "codemode://capabilities" });
    const text = (caps.contents[0] as { text: string }).text;
    assert.match(text, /## Configured servers \(1\)\n- `everything`/);
    assert.match(text, /## Policy\n- Some servers or tools may be hidden/);

    const refusal = await value(
      s,
      `
try:
    await runtime.call_tool("memory", "read_graph", {})
except PermissionError as e:
    out = str(e)
out`,
    );
    assert.equal(refusal, `'Server "memory" is denied by policy (denyServers in ${file} has "memory")'`);
    const preloaded = await s.client.callTool({
      name: "run_python",
      arguments: { code: "1", servers: ["memory"] },
    });
    assert.equal(preloaded.isError, true);
    assert.match((preloaded.content as { text: string }[])[0].text, /Server "memory" is denied by policy/);

    const tools = await value(s, "sorted(t['tool'] for t in await runtime.list_tools('everything'))");
    assert.ok(tools.includes("'echo'") && tools.includes("'get-sum'"), tools);
    assert.ok(!tools.includes("get-env") && !tools.includes("toggle-"), tools);
    const hits = await value(
      s,
      "sorted({h['server'] + '/' + h['tool'] for q in ('environment variables', 'toggle logging', 'graph entities') for h in await runtime.search_tool_docs(q, limit=20)})",
    );
    assert.ok(!/get-env|toggle-|memory\//.test(hits), hits);

    // The pre-run check refuses the call before the program runs; without it, the host refuses the call.
    const refused =
      `Tool "everything/get-env" is denied by policy \\(denyTools in ${file} has "everything/get-env"\\)`;
    const checked = await s.run("await mcp_everything.get_env()");
    assert.equal(checked.isError, true);
    assert.match(checked.text, new RegExp(`The pre-run check found 1 problem[^]*${refused} \\[refused\\]`));
    const called = await s.run("# codemode: nocheck\nawait mcp_everything.get_env()");
    assert.equal(called.isError, true);
    assert.match(called.text, new RegExp(`PermissionError: ${refused}`));
    assert.equal(await value(s, "await mcp_everything.echo(message='still fine')"), "'Echo: still fine'");
  });
  assert.equal(memoryStarted(), false, "a denied server's command never ran");
});

test("read-only mode from the environment beats the file and allows only readOnlyHint tools", async () => {
  const { home, memoryFile } = homeWith("readOnly: false\n");
  await withServe({ CODEMODE_READ_ONLY: "1", CODEMODE_TIMEOUT: "30" }, home, async (s) => {
    const memoryTools = await value(
      s,
      "from mcp import runtime\nsorted(t['tool'] for t in await runtime.list_tools('memory'))",
    );
    assert.equal(memoryTools, "['open_nodes', 'read_graph', 'search_nodes']");
    assert.equal(await value(s, "type(await mcp_memory.read_graph()).__name__"), "'dict'");
    const refusal = await value(
      s,
      `
try:
    await mcp_memory.create_entities(entities=[{"name": "x", "entityType": "t", "observations": []}])
except PermissionError as e:
    out = str(e)
out`,
    );
    assert.equal(
      refusal,
      "'Tool \"memory/create_entities\" is refused by policy: read-only mode (CODEMODE_READ_ONLY) allows only tools annotated readOnlyHint, and this one is not'",
    );
    assert.equal(await value(s, "await mcp_memory.read_graph()"), "{'entities': [], 'relations': []}");
    assert.ok(!existsSync(memoryFile), "nothing was written");
  });
});

test("per-run limits from the file: tool calls, output bytes and wall time", async () => {
  const { home } = homeWith("maxToolCalls: 5\nmaxOutput: 2k\nmaxTimeout: 4s\n");
  await withServe({ CODEMODE_TIMEOUT: "3" }, home, async (s) => {
    const calls = `
import asyncio
ok, refused = 0, []
for i in range(8):
    try:
        await mcp_everything.echo(message=str(i))
        ok += 1
    except PermissionError as e:
        refused.append(str(e))
(ok, len(refused), refused[0])`;
    const first = await value(s, calls);
    assert.match(
      first,
      /^\(5, 3, 'Tool call refused by policy: this run already made its 5 allowed tool calls/,
    );
    assert.match(first, /maxToolCalls in .*codemode\.yaml/);
    const gathered = await value(
      s,
      "r = await asyncio.gather(*[mcp_everything.echo(message='g') for _ in range(9)], return_exceptions=True)\n" +
        "(sum(isinstance(x, str) for x in r), sum(isinstance(x, PermissionError) for x in r))",
    );
    assert.equal(gathered, "(5, 4)", "concurrent calls of one run share its limit; every call was answered");
    assert.match(await value(s, calls), /^\(5, 3,/, "the next run starts from zero");

    const big = await s.run("print('x' * 10000)");
    assert.equal(big.isError, false, big.text);
    assert.ok(big.text.length < 4000, `output capped at 2 KiB, got ${big.text.length} characters`);
    assert.match(big.text, /truncat|dropped/i);

    const slow = await s.run("import time\ntime.sleep(30)", 60);
    assert.equal(slow.structured.status, "timeout");
    assert.match(slow.text, /timeout lowered to the 4s maximum/);
    assert.equal(await value(s, "'alive'"), "'alive'");
  });
});

test("caps over HTTP: runs beyond maxRuns wait their turn, sessions beyond maxSessions evict or are refused", async () => {
  const { home } = homeWith("maxRuns: 1\n");
  const served = await startHttpServe(home, { CODEMODE_RUNTIME: "podman", CODEMODE_MAX_SESSIONS: "2" });
  const clients = await Promise.all([
    connectHttp(served.url),
    connectHttp(served.url),
    connectHttp(served.url),
  ]);
  const [a, b, c] = clients;
  try {
    // Start both sandboxes first so the concurrent runs below compete for the slot, not for start-up.
    assert.deepEqual(await Promise.all([a.run("'a'"), b.run("'b'")]).then((r) => r.map((x) => x.value)), [
      "'a'",
      "'b'",
    ]);
    const [ra, rb] = await Promise.all([
      a.run("import time\ntime.sleep(2)\n'a done'", 30),
      b.run("import time\ntime.sleep(2)\n'b done'", 30),
    ]);
    assert.deepEqual([ra.value, rb.value], ["'a done'", "'b done'"], "both runs were answered");
    const waited = [ra, rb].filter((r) =>
      /waited [\d.]+s for a run slot \(CODEMODE_MAX_RUNS allows 1 at once\)/.test(r.text)
    );
    assert.equal(waited.length, 1, `exactly one run queued: ${ra.text} | ${rb.text}`);

    const busy = [a.run("import time\ntime.sleep(4)\n'a'", 30), b.run("import time\ntime.sleep(4)\n'b'", 30)];
    await new Promise((r) => setTimeout(r, 1000));
    const refused = await c.run("'c'");
    assert.equal(refused.isError, true);
    assert.match(refused.text, /All 2 sandbox sessions are running code \(CODEMODE_MAX_SESSIONS=2\)/);
    assert.deepEqual((await Promise.all(busy)).map((r) => r.value), ["'a'", "'b'"]);

    assert.equal((await c.run("'c'")).value, "'c'", "an idle session made room");
    assert.ok(
      await eventually(async () => (await containersLabelled(LABELS.owner, served.pid)).length === 2),
      "the cap holds: two sandboxes",
    );
    assert.ok(!served.stderr().includes(SERVER_SECRET));
  } finally {
    await Promise.allSettled(clients.map((x) => x.end()));
    assert.equal(await served.stop(), 0);
  }
  assert.equal(served.stdout(), "");
  assert.ok(
    await eventually(async () => (await containersLabelled(LABELS.owner, served.pid)).length === 0),
    "no sandbox outlives serve",
  );
});

/** Runs the CLI from source in `home` with `args`; resolves with its exit code and output. */
function cli(home: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(join(ROOT, "node_modules/.bin/deno"), [
    "run",
    "-A",
    "--quiet",
    join(ROOT, "cli.ts"),
    ...args,
  ], {
    cwd: home,
    env: { PATH: process.env.PATH ?? "", HOME: home, CODEMODE_STATE_DIR: join(home, "state") },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stdout, stderr })));
}

test("a malformed config file stops serve with a clear error and fails doctor", async () => {
  const { home } = homeWith("readOnly: true\nmaxToolCalls: lots\n");
  const file = join(home, "codemode.yaml");
  const served = await cli(home, ["serve"]);
  assert.equal(served.code, 1);
  assert.equal(served.stdout, "", "nothing on the protocol channel");
  assert.match(
    served.stderr,
    new RegExp(`Invalid maxToolCalls="lots" in "${file}": expected a whole number`),
  );

  writeFileSync(file, "readOnly: true\n  denyServers: [x\n");
  const broken = await cli(home, ["serve"]);
  assert.equal(broken.code, 1);
  assert.match(broken.stderr, new RegExp(`Cannot parse config "${file}": .* at line \\d+, column \\d+`));

  const doctor = await cli(home, ["doctor", "--json", "--quick"]);
  assert.equal(doctor.code, 1);
  const report = JSON.parse(doctor.stdout);
  assert.equal(report.configFile.status, "fail");
  assert.equal(report.configFile.path, file);
  assert.ok(report.findings.some((f: { subject: string }) => f.subject === "config file"));

  writeFileSync(file, "denyServers: [memory]\nmaxToolCalls: 9\n");
  const fine = JSON.parse((await cli(home, ["doctor", "--json", "--quick"])).stdout);
  assert.equal(fine.configFile.status, "ok");
  const rule = (key: string) => fine.policy.rules.find((r: { key: string }) => r.key === key);
  assert.deepEqual([rule("denyServers").value, rule("denyServers").source], [["memory"], file]);
  assert.deepEqual([rule("maxToolCalls").value, rule("maxSessions").source], [9, "default"]);
  assert.deepEqual(fine.policy.refusedServers.map((r: { name: string }) => r.name), ["memory"]);
});
