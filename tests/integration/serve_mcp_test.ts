/**
 * `codemode serve` end to end over stdio with the SDK client: the one tool, state across calls, errors,
 * timeouts, and sandbox code calling real MCP servers from npm through the generated proxies.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakeHome, ROOT, serve, type Served, serveTest } from "./_serve.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED serve end-to-end suite: podman or image ${TEST_IMAGE} missing`);

const files = mkdtempSync(join(tmpdir(), "codemode-files-"));
writeFileSync(join(files, "big.txt"), "0123456789abcdef".repeat(6 * 1024 * 1024 / 16));
writeFileSync(join(files, "notes.md"), "# notes\nTODO: one\nTODO: two\n");
const deno = join(ROOT, "node_modules/.bin/deno");
const faulty = join(ROOT, "tests/testdata/servers/faulty_server.ts");

const home = fakeHome({
  filesystem: {
    command: "node",
    args: [join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), files],
  },
  faulty: { command: deno, args: ["run", "-A", "--quiet", faulty], timeout: 2000 },
});

let served: Served | undefined;
async function session(): Promise<Served> {
  served ??= await serve({ CODEMODE_RUNTIME: "podman", CODEMODE_TIMEOUT: "20" }, home);
  return served;
}

const test = serveTest(usable, session);

test("tools/list offers exactly run_python", async (s) => {
  const { tools } = await s.client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ["run_python"]);
});

test("two run_python calls share state, and the value of the last expression comes back", async (s) => {
  const a = await s.run("counter = 40\nprint('set')");
  assert.equal(a.text, "set\n");
  const b = await s.run("counter += 2\ncounter");
  assert.equal(b.text, "42");
  assert.deepEqual({ status: b.structured.status, value: b.structured.value }, { status: "ok", value: "42" });
});

test("a megabyte echoed and printed back arrives whole, carried once (in the text)", async (s) => {
  const r = await s.run('r = await mcp_everything.echo(message="é" * 500_000)\nprint(r)');
  assert.equal(r.text, `Echo: ${"é".repeat(500_000)}\n`);
  assert.equal(r.structured.stdout, undefined);
  assert.equal(r.structured.stdout_in_text, true);
  assert.equal(r.structured.status, "ok");
});

test("an exception is an error result with the traceback", async (s) => {
  const r = await s.run("1/0");
  assert.equal(r.isError, true);
  assert.match(r.text, /ZeroDivisionError: division by zero/);
});

test("a run past its timeout is interrupted and reported", async (s) => {
  const r = await s.run("import time\ntime.sleep(30)", 1);
  assert.equal(r.isError, true);
  assert.equal(r.structured.status, "timeout");
  assert.equal((await s.run("'after timeout'")).text, "'after timeout'");
});

test("sandbox code calls echo, get-sum and structured content on server-everything", async (s) => {
  const r = await s.run(`
echo = await mcp_everything.echo(message="hi")
total = await mcp_servers["everything"].get_sum(a=2, b=3)
from mcp.servers.everything import get_structured_content
weather = await get_structured_content(location="Chicago")
(echo, total, sorted(weather))`);
  assert.equal(r.isError, false, r.text);
  assert.equal(
    r.structured.value,
    "('Echo: hi', 'The sum of 2 and 3 is 5.', ['conditions', 'humidity', 'temperature'])",
  );
});

test("the tiny image arrives as bytes with its MIME type, and raw=True gives the whole result", async (s) => {
  const r = await s.run(`
items = await mcp_everything.get_tiny_image()
images = [i for i in items if isinstance(i, bytes)]
raw = await mcp_everything.get_tiny_image(raw=True)
(len(images), images[0].mime_type, images[0][:4], sorted(raw))`);
  assert.equal(r.isError, false, r.text);
  assert.match(String(r.structured.value), /^\(1, 'image\/png', b'\\x89PNG', \['content'/);
});

test("an erroring tool raises ToolError with the server's message", async (s) => {
  const r = await s.run(`
try:
    await mcp_faulty.fail()
except ToolError as e:
    caught = str(e)
caught`);
  assert.equal(r.isError, false, r.text);
  assert.match(String(r.structured.value), /.+/);
});

test("a result larger than 5 MB comes through the filesystem server", async (s) => {
  const r = await s.run(`
result = await mcp_filesystem.read_text_file(path=${JSON.stringify(join(files, "big.txt"))})
text = result["content"]  # the server answers with structured content {"content": ...}
(len(text), text[:16])`);
  assert.equal(r.isError, false, r.text.slice(0, 300));
  assert.equal(r.structured.value, `(${6 * 1024 * 1024}, '0123456789abcdef')`);
});

test("100 calls under asyncio.gather all succeed", async (s) => {
  const r = await s.run(`
import asyncio
out = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(100)])
out == [f"Echo: {i}" for i in range(100)]`);
  assert.equal(r.structured.value, "True", r.text);
});

test("an upstream killed mid-session fails its call clearly and the next call restarts it", async (s) => {
  const r = await s.run(`
pid = int(await mcp_faulty.pid())
try:
    await mcp_faulty.crash(code=7)
    outcome = 'no error'
except Exception as e:
    outcome = type(e).__name__ + ': ' + str(e)
again = int(await mcp_faulty.pid())
(outcome, again != pid)`);
  assert.equal(r.isError, false, r.text);
  assert.match(String(r.structured.value), /exited \(code 7\)/);
  assert.match(String(r.structured.value), /, True\)$/);
});

test("a hanging upstream call times out per its config and the session goes on", async (s) => {
  const r = await s.run(`
try:
    await mcp_faulty.hang()
    outcome = 'answered'
except TimeoutError as e:
    outcome = 'TimeoutError'
outcome`);
  assert.equal(r.structured.value, "'TimeoutError'", r.text);
});

test("search finds tools by description words and with typos", async (s) => {
  const r = await s.run(`
from mcp import runtime
a = await runtime.search_tool_docs("sum of two numbers", limit=3)
b = runtime.search_tool_docs_sync("raed txt file", limit=3)
([h["tool"] for h in a], [h["tool"] for h in b])`);
  assert.equal(r.isError, false, r.text);
  const [sum, read] = JSON.parse(
    String(r.structured.value).replace(/^\(/, "[").replace(/\)$/, "]").replaceAll("'", '"'),
  );
  assert.equal(sum[0], "get-sum");
  assert.ok(read.includes("read_text_file"), `typo search gave ${read}`);
});

test("unknown tools and servers give clear errors in Python", async (s) => {
  const r = await s.run(`
errors = []
for call in (lambda: mcp_everything.no_such_tool(), lambda: runtime.call_tool("nope", "x", {})):
    try:
        await call()
    except Exception as e:
        errors.append(type(e).__name__ + ": " + str(e))
errors`);
  assert.match(String(r.structured.value), /no tool "no_such_tool"/);
  assert.match(String(r.structured.value), /Unknown server "nope"/);
});

test("closing the client stops the server and its sandbox", async (s) => {
  const pid = s.transport.pid;
  await s.close();
  served = undefined;
  const left = (await runtime.listManaged()).filter((m) => m.labels["codemode.owner-pid"] === String(pid));
  for (let i = 0; i < 40 && left.length; i++) await new Promise((r) => setTimeout(r, 250));
  const after = (await runtime.listManaged()).filter((m) => m.labels["codemode.owner-pid"] === String(pid));
  assert.deepEqual(after.map((m) => m.name), []);
});
