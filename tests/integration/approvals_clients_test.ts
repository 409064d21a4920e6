/**
 * Approvals across clients, transports and runtimes: a client without the elicitation capability
 * (fallback deny, then allow), `serve --http` with two sessions where only the session whose code made
 * the call is asked, and the paused run clock on docker (frames over stdio rather than podman's socket)
 * and on the embedded Pyodide runtime.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runWithin, serve, type Served } from "./_serve.ts";
import { connectHttp, startHttpServe } from "./_serve_http.ts";
import { approvalHome, askingClient, reply } from "./_approvals.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import type { StatsSnapshot } from "../../core/observe/stats.ts";

const onPodman = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
const onDocker = (await docker().detect()).available && await docker().imageExists(TEST_IMAGE);
const onPyodide = (await pyodide().detect()).available;
for (const [name, ok] of [["podman", onPodman], ["docker", onDocker], ["pyodide", onPyodide]] as const) {
  if (!ok) console.warn(`IGNORED approval tests on ${name}: runtime or image ${TEST_IMAGE} missing`);
}

const test = (name: string, usable: boolean, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });
const py = (text: string) => JSON.stringify(text);

async function closing(s: Served, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } finally {
    await s.close();
  }
}

test(
  "a client without the elicitation capability cannot be asked: the call raises PermissionError",
  onPodman,
  async () => {
    const h = approvalHome();
    const s = await serve(
      { CODEMODE_RUNTIME: "podman", CODEMODE_CONFIRM_TOOLS: "filesystem/write_*" },
      h.home,
    );
    await closing(s, async () => {
      const file = join(h.dir, "unasked.txt");
      const r = await s.run(
        `try:
    await mcp_filesystem.write_file(path=${py(file)}, content="x")
    out = "written"
except PermissionError as e:
    out = str(e)
out`,
      );
      assert.equal(
        r.structured.value,
        `'Call to "filesystem/write_file" needs the user\\'s approval (CODEMODE_CONFIRM_TOOLS has "filesystem/write_*"), ` +
          "and this client cannot ask: it does not support MCP elicitation. Use a client that does, keep the " +
          "dashboard (codemode ui) open to answer there, or set CODEMODE_CONFIRM_FALLBACK=allow'",
      );
      assert.equal(existsSync(file), false);
      const listed = await s.run(`(await mcp_filesystem.list_allowed_directories())["content"]`);
      assert.match(
        String(listed.structured.value),
        /Allowed directories/,
        "calls that need no approval still run",
      );
      const stats = JSON.parse(
        ((await s.client.readResource({ uri: "codemode://stats" })).contents[0] as { text: string }).text,
      ) as StatsSnapshot;
      assert.deepEqual(stats.approvals, { asked: 0, approved: 0, declined: 0, timedOut: 0, unavailable: 1 });
    });
  },
);

test(
  "with CODEMODE_CONFIRM_FALLBACK=allow such a call runs and the result says so (docker)",
  onDocker,
  async () => {
    const h = approvalHome();
    const s = await serve(
      { CODEMODE_RUNTIME: "docker", CODEMODE_CONFIRM_DESTRUCTIVE: "1", CODEMODE_CONFIRM_FALLBACK: "allow" },
      h.home,
    );
    await closing(s, async () => {
      const r = await s.run(`[(await mcp_notes.add_note(text=str(i)))["count"] for i in range(3)]`);
      assert.equal(r.isError, false, r.text);
      assert.equal(r.structured.value, "[1, 2, 3]");
      assert.deepEqual(r.structured.notes, [
        '"notes/add_note" ran without approval: it needs one (CODEMODE_CONFIRM_DESTRUCTIVE asks before every ' +
        "tool that may change things, and this one is not annotated readOnlyHint or destructiveHint: false), " +
        "this client cannot be asked (it does not support MCP elicitation), and CODEMODE_CONFIRM_FALLBACK=allow",
      ], "one note, however many calls");
      assert.match(r.text, /note: "notes\/add_note" ran without approval/);
      assert.equal(readFileSync(h.notesFile, "utf8"), "0\n1\n2\n");
    });
  },
);

test(
  "over HTTP the question goes to the session whose code made the call, never to another",
  onPodman,
  async () => {
    const h = approvalHome();
    const http = await startHttpServe(h.home, {
      CODEMODE_RUNTIME: "podman",
      CODEMODE_CONFIRM_TOOLS: "notes/add_note",
    });
    const a = askingClient("session-a", reply.approve("session"));
    const b = askingClient("session-b", reply.after(300, reply.approve()));
    try {
      const [ca, cb] = [await connectHttp(http.url, {}, a.client), await connectHttp(http.url, {}, b.client)];
      assert.notEqual(ca.sessionId(), cb.sessionId());
      const first = await ca.run(`(await mcp_notes.add_note(text="from A"))["count"]`);
      assert.equal(first.isError, false, first.text);
      assert.deepEqual([a.questions.length, b.questions.length], [1, 0]);
      assert.match(a.questions[0].question.message, /text="from A"/);

      // Both at once: each session hears only its own question. A approved the tool for its session.
      const [ra, rb] = await Promise.all([
        ca.run(`await mcp_notes.add_note(text="A again")`),
        cb.run(`await mcp_notes.add_note(text="from B")`),
      ]);
      assert.equal(ra.isError || rb.isError, false, ra.text + rb.text);
      assert.deepEqual([a.questions.length, b.questions.length], [1, 1], "A's session approval is not B's");
      assert.match(b.questions[0].question.message, /text="from B"/);
      const again = await cb.run(`await mcp_notes.add_note(text="B again")`);
      assert.equal(again.isError, false);
      assert.deepEqual([a.questions.length, b.questions.length], [1, 2]);
      assert.deepEqual(readFileSync(h.notesFile, "utf8").split("\n").filter(Boolean).sort(), [
        "A again",
        "B again",
        "from A",
        "from B",
      ]);
      await Promise.all([ca.end(), cb.end()]);
    } finally {
      await http.stop();
    }
    assert.equal(http.stdout(), "", "stdout of serve --http stays empty");
  },
);

test(
  "the run clock pauses on docker too (frames over stdio): timeout=2 survives a 4 s approval wait",
  onDocker,
  async () => {
    const h = approvalHome();
    const asking = askingClient("docker-pause", reply.after(4000, reply.approve()));
    const s = await serve(
      { CODEMODE_RUNTIME: "docker", CODEMODE_CONFIRM_DESTRUCTIVE: "1" },
      h.home,
      asking.client,
    );
    await closing(s, async () => {
      const r = await s.run(`(await mcp_notes.add_note(text="slowly approved"))["count"]`, 2);
      assert.equal(r.isError, false, r.text);
      assert.equal(r.structured.value, "1");
      assert.ok(Number(r.structured.duration) >= 4, r.text);
      const slow = await s.run("import time\ntime.sleep(5)", 2);
      assert.equal(slow.structured.status, "timeout", "the timeout still holds when nobody is asked");
    });
  },
);

test(
  "the run clock pauses on the Pyodide runtime too: timeout=2 survives a 4 s approval wait",
  onPyodide,
  async () => {
    const h = approvalHome();
    const asking = askingClient("pyodide-pause", reply.after(4000, reply.approve()));
    const s = await serve(
      { CODEMODE_RUNTIME: "pyodide", CODEMODE_CONFIRM_DESTRUCTIVE: "1" },
      h.home,
      asking.client,
    );
    await closing(s, async () => {
      await runWithin(s, "1", 60, 300_000); // Pyodide's first start is slow, more so on a busy machine
      const r = await s.run(`(await mcp_notes.add_note(text="slowly approved"))["count"]`, 2);
      assert.equal(r.isError, false, r.text);
      assert.equal(r.structured.value, "1");
      const slow = await s.run("import asyncio\nawait asyncio.sleep(5)", 2);
      assert.equal(slow.structured.status, "timeout", "the timeout still holds when nobody is asked");
    });
  },
);
