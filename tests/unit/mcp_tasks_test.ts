/**
 * run_python as an MCP task (core/serve/tasks.ts) over an in-memory transport with a fake runner: the
 * wire shapes and errors of tasks/get, tasks/result, tasks/list and tasks/cancel, the task's time limit,
 * and that a client without tasks sees no change. The real thing (sandboxes, ext-tasks over HTTP,
 * reconnects) is tests/integration/tasks_test.ts.
 */
import assert from "node:assert/strict";
import { Client, ProtocolError } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import { type CodeRunner, createMcpServer } from "../../core/serve/mcp_server.ts";
import { compact } from "../../plugins/output/compact.ts";
import type { RunResult } from "../../core/contracts/output.ts";

/** A runner whose runs end when the test says (or at once with `answer`), recording what they got. */
function gatedRunner() {
  const runs: { code: string; timeout: number; signal?: AbortSignal; finish(r: RunResult): void }[] = [];
  const runner: CodeRunner = {
    run(_key, code, { timeout, signal }) {
      return new Promise((resolve) => {
        const run = { code, timeout, signal, finish: resolve };
        runs.push(run);
        signal?.addEventListener(
          "abort",
          () => resolve({ status: "cancelled", stdout: "", stderr: "", error: "cancelled", duration: 1 }),
        );
      });
    },
  };
  return { runner, runs };
}

async function connect(runner: CodeRunner, maxTaskTime: number | null = 3600) {
  const server = createMcpServer({
    runner,
    output: compact(),
    defaultTimeout: 30,
    maxTimeout: 120,
    ...(maxTaskTime === null ? {} : { maxTaskTime }),
    capabilities: () => "",
    preload: () => Promise.resolve([]),
    sessionKey: "k",
    version: "9.9.9",
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  // Messages go through JSON, as on a real transport (undefined fields vanish).
  for (const side of [a, b]) {
    const send = side.send.bind(side);
    side.send = (message, options) => send(JSON.parse(JSON.stringify(message)), options);
  }
  await server.connect(a);
  const client = new Client({ name: "test", version: "1" });
  await client.connect(b);
  const raw = (method: string, params: Record<string, unknown>) =>
    client.request(
      { method, params } as never,
      { "~standard": { version: 1, vendor: "t", validate: (v: unknown) => ({ value: v }) } } as never,
    ) as Promise<
      Record<string, unknown>
    >;
  return { client, raw, close: () => Promise.all([client.close(), server.close()]) };
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
};
const ok = (stdout: string): RunResult => ({ status: "ok", stdout, stderr: "", duration: 0.01 });

Deno.test("run_python declares optional task support; a task-augmented call returns a working task at once", async () => {
  const { runner, runs } = gatedRunner();
  const { client, raw, close } = await connect(runner);
  try {
    assert.deepEqual(client.getServerCapabilities()?.tasks, {
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
    assert.deepEqual((await client.listTools()).tools[0].execution, { taskSupport: "optional" });
    const created = await raw("tools/call", {
      name: "run_python",
      arguments: { code: "long()" },
      task: { ttl: 90_000 },
    });
    const task = created.task as Record<string, unknown>;
    assert.equal(task.status, "working");
    assert.equal(task.ttl, 90_000);
    assert.equal(task.pollInterval, 1000);
    assert.match(String(task.taskId), /^[0-9a-f-]{36}$/);
    await until(() => runs.length === 1);
    assert.equal(runs[0].timeout, 3600, "a task may run CODEMODE_MAX_TASK_TIME by default");
    const got = await raw("tasks/get", { taskId: task.taskId });
    assert.equal(got.status, "working");
    assert.equal(
      (got._meta as Record<string, unknown> | undefined)?.["io.modelcontextprotocol/related-task"],
      undefined,
    );
    const waiting = raw("tasks/result", { taskId: task.taskId });
    runs[0].finish(ok("done\n"));
    const result = await waiting;
    assert.deepEqual(result.content, [{ type: "text", text: "done\n" }]);
    assert.deepEqual((result._meta as Record<string, unknown>)["io.modelcontextprotocol/related-task"], {
      taskId: task.taskId,
    });
    assert.equal((await raw("tasks/get", { taskId: task.taskId })).status, "completed");
    const listed = await raw("tasks/list", {});
    assert.deepEqual((listed.tasks as { taskId: string }[]).map((t) => t.taskId), [task.taskId]);
  } finally {
    await close();
  }
});

Deno.test("a task's timeout argument still applies, within CODEMODE_MAX_TASK_TIME", async () => {
  const { runner, runs } = gatedRunner();
  const { raw, close } = await connect(runner, 600);
  try {
    await raw("tools/call", { name: "run_python", arguments: { code: "a", timeout: 45 }, task: {} });
    await raw("tools/call", { name: "run_python", arguments: { code: "b", timeout: 5000 }, task: {} });
    await until(() => runs.length === 2);
    assert.deepEqual(runs.map((r) => r.timeout).sort((x, y) => x - y), [45, 600]);
    for (const run of runs) run.finish(ok(""));
  } finally {
    await close();
  }
});

Deno.test("a failing run makes a failed task; tasks/cancel aborts the run; unknown and finished tasks are errors", async () => {
  const { runner, runs } = gatedRunner();
  const { client, raw, close } = await connect(runner);
  const session = createTaskSessionFromClient(client, { endpointId: "unit" });
  try {
    const failing = await session.callTool("run_python", { code: "raise" }, {
      task: { preference: "require" },
    });
    await until(() => runs.length === 1);
    runs[0].finish({ status: "error", stdout: "", stderr: "", error: "ValueError: bad", duration: 1 });
    const failed = await failing.settle();
    assert.equal(failed.outcome.status, "failed");
    assert.throws(() => resultFromTaskOutcome(failed.outcome), /ValueError: bad/);

    const long = await session.callTool("run_python", { code: "sleep" }, { task: { preference: "require" } });
    assert.equal(long.kind, "task");
    await until(() => runs.length === 2);
    await session.cancelTask(long.handle!.taskId);
    assert.equal(runs[1].signal?.aborted, true, "the run is interrupted");
    assert.equal((await long.settle()).outcome.status, "cancelled");
    await assert.rejects(
      raw("tasks/cancel", { taskId: long.handle!.taskId }),
      (e: unknown) => e instanceof ProtocolError && e.code === -32602 && /already cancelled/.test(e.message),
    );
    await assert.rejects(
      raw("tasks/get", { taskId: "no-such-task" }),
      (e: unknown) => e instanceof ProtocolError && e.code === -32602 && /Task not found/.test(e.message),
    );
  } finally {
    await session.close();
    await close();
  }
});

Deno.test("without CODEMODE_MAX_TASK_TIME support nothing changes: no tasks capability, a task param is ignored", async () => {
  const { runner, runs } = gatedRunner();
  const { client, raw, close } = await connect(runner, null);
  try {
    assert.equal(client.getServerCapabilities()?.tasks, undefined);
    assert.equal((await client.listTools()).tools[0].execution, undefined);
    const answer = raw("tools/call", { name: "run_python", arguments: { code: "1" }, task: {} });
    await until(() => runs.length === 1);
    runs[0].finish(ok("1\n"));
    const result = await answer;
    assert.equal(result.task, undefined);
    assert.deepEqual(result.content, [{ type: "text", text: "1\n" }]);
    assert.equal(runs[0].timeout, 30);
  } finally {
    await close();
  }
});
