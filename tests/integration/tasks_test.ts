/**
 * `run_python` as an MCP task, with real SDK clients that use tasks: `@modelcontextprotocol/ext-tasks`
 * over `serve --http` (a 90 s run whose requests time out after 10 s, a cancel that keeps the session, a
 * client that drops its connection and comes back for the result), and the 2025-11-25 SDK client's
 * `experimental.tasks` over stdio. The HTTP scenarios share one serve, and all four run at once, so the
 * file takes about as long as its longest run (90 s) plus the sandboxes' start.
 */
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionFromClient,
  resultFromTaskOutcome,
  type SerializedTaskReference,
  type ToolExecution,
} from "@modelcontextprotocol/ext-tasks/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client";
import type { StdioClientTransport as StdioV1Type } from "@modelcontextprotocol/sdk/client/stdio";
// @ts-ignore: the package's "./*" export maps these types to "stdio.js.d.ts", which `deno check` cannot find
import { StdioClientTransport as StdioV1Untyped } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResultSchema as SchemaType } from "@modelcontextprotocol/sdk/types";
// @ts-ignore: as above
import { CallToolResultSchema as SchemaUntyped } from "@modelcontextprotocol/sdk/types.js";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { assertNoSandboxOf, fakeHome, serveCommand } from "./_serve.ts";
import { connectHttp, startHttpServe } from "./_serve_http.ts";

const StdioClientTransportV1 = StdioV1Untyped as unknown as typeof StdioV1Type;
const CallToolResultSchema = SchemaUntyped as unknown as typeof SchemaType;
/** A tool call the server made a task. */
type TaskExecution = Extract<ToolExecution<unknown>, { kind: "task" }>;

const usable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Every request the task clients make times out after this long; the runs take far longer. */
const REQUEST_TIMEOUT_MS = 10_000;

type CallResult = { content: { type: string; text?: string }[]; structuredContent?: Record<string, unknown> };

function text(result: unknown): string {
  return ((result as CallResult).content ?? []).map((c) => c.text ?? "").join("\n");
}

/** A 90 s run as a task: no request waits longer than 10 s, and the result is fetched once it ends. */
async function longRun(url: string): Promise<void> {
  const c = await connectHttp(url);
  const progress: string[] = [];
  c.client.setNotificationHandler("notifications/progress", (n) => {
    progress.push(String(n.params.message ?? ""));
  });
  const session = createTaskSessionFromClient(c.client, { endpointId: "codemode-long" });
  try {
    const started = Date.now();
    const execution = await session.callTool(
      "run_python",
      { code: "for i in range(9):\n    print('tick', i)\n    await asyncio.sleep(10)\n'long done'" },
      {
        task: { preference: "require" },
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        metadata: { progressToken: "long" },
      },
    );
    assert.equal(execution.kind, "task");
    assert.ok(Date.now() - started < REQUEST_TIMEOUT_MS, "the task comes back at once");
    const { outcome } = await execution.settle();
    const result = resultFromTaskOutcome(outcome);
    assert.ok(Date.now() - started >= 90_000, "the run took its 90 s");
    assert.match(text(result), /tick 0\ntick 1[\s\S]*tick 8\n[\s\S]*value: 'long done'/);
    assert.equal((result as { isError?: boolean }).isError, false);
    assert.match(
      progress.join(""),
      /tick 0\n[\s\S]*tick 7\n/,
      "output came as progress while the task worked",
    );
  } finally {
    await session.close();
    await c.end();
  }
}

/** tasks/cancel interrupts the run; the session, with its variables, goes on. */
async function cancelRun(url: string): Promise<void> {
  const c = await connectHttp(url);
  const session = createTaskSessionFromClient(c.client, { endpointId: "codemode-cancel" });
  try {
    assert.equal((await c.run("kept = 41\nkept")).value, "41");
    const execution = await session.callTool(
      "run_python",
      { code: "print('waiting')\nawait asyncio.sleep(120)" },
      { task: { preference: "require" }, requestTimeoutMs: REQUEST_TIMEOUT_MS },
    ) as TaskExecution;
    await sleep(3000);
    const started = Date.now();
    await session.cancelTask(execution.handle.taskId);
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "cancelled");
    const listed = await session.listTasks();
    const mine = listed.tasks.find((t) => t.taskId === execution.handle.taskId);
    assert.equal(mine?.status, "cancelled");
    const after = await c.run("kept + 1");
    assert.equal(after.value, "42", `the session is kept: ${after.text}`);
    assert.ok(Date.now() - started < 30_000, "the cancel interrupted the run, no 120 s wait");
  } finally {
    await session.close();
    await c.end();
  }
}

/** The client drops its connection while the task works, comes back to the same session and gets the result. */
async function reconnect(url: string): Promise<void> {
  const client = new Client({ name: "codemode-reconnect", version: "1" });
  const first = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(first);
  const sessionId = first.sessionId!;
  const before = createTaskSessionFromClient(client, { endpointId: "codemode-reconnect" });
  const execution = await before.callTool(
    "run_python",
    { code: "kept = 'from before'\nawait asyncio.sleep(8)\n'after the reconnect'" },
    { task: { preference: "require" }, requestTimeoutMs: REQUEST_TIMEOUT_MS },
  ) as TaskExecution;
  // Handing the task off releases it: closing the session would cancel a task it still owns.
  let reference!: SerializedTaskReference;
  await execution.handoff((ref) => void (reference = ref));
  await before.close();
  await first.close(); // the connection drops; the HTTP session is not ended
  // Away longer than the server's idle timeout (3s): the working task keeps the session.
  await sleep(5000);
  const second = new StreamableHTTPClientTransport(new URL(url), { sessionId });
  await client.connect(second);
  const after = createTaskSessionFromClient(client, { endpointId: "codemode-reconnect" });
  try {
    const resumed = await after.resumeTask(reference, { requestTimeoutMs: REQUEST_TIMEOUT_MS });
    const { outcome } = await resumed.settle();
    assert.match(text(resultFromTaskOutcome(outcome)), /'after the reconnect'/);
    const again = await client.callTool({ name: "run_python", arguments: { code: "kept" } });
    assert.match(text(again), /'from before'/, "the same session, with its sandbox");
  } finally {
    await after.close();
    await second.terminateSession();
    await client.close();
  }
}

/** The 2025-11-25 SDK client over stdio: callToolStream makes run_python a task and streams it to its result;
 * the same client calling without a task gets a plain result. */
async function stdioV1(): Promise<void> {
  const transport = new StdioClientTransportV1(serveCommand(fakeHome(), { CODEMODE_RUNTIME: "podman" }));
  const client = new ClientV1({ name: "codemode-v1-tasks", version: "1" });
  await client.connect(transport);
  try {
    const tool = (await client.listTools()).tools.find((t) => t.name === "run_python");
    assert.deepEqual(tool?.execution, { taskSupport: "optional" });
    const kinds: string[] = [];
    let result: unknown;
    let taskId: string | undefined;
    for await (
      const message of client.experimental.tasks.callToolStream(
        { name: "run_python", arguments: { code: "await asyncio.sleep(2)\n6 * 7" } },
        CallToolResultSchema,
        { task: { ttl: 120_000 }, timeout: REQUEST_TIMEOUT_MS },
      )
    ) {
      kinds.push(message.type);
      if (message.type === "taskCreated") taskId = message.task.taskId;
      if (message.type === "result") result = message.result;
      if (message.type === "error") {
        const task = taskId ? await client.experimental.tasks.getTask(taskId) : undefined;
        throw new Error(`${message.error.message}: ${task?.statusMessage ?? "no status message"}`);
      }
    }
    assert.equal(kinds[0], "taskCreated");
    assert.equal(kinds.at(-1), "result");
    assert.match(text(result), /42/);
    const plain = await client.callTool({ name: "run_python", arguments: { code: "7 * 6" } });
    assert.match(text(plain), /42/);
    assert.equal((plain as { task?: unknown }).task, undefined);
  } finally {
    await client.close();
  }
}

Deno.test({
  name:
    "MCP tasks: ext-tasks over serve --http (a 90 s task under 10 s request timeouts, tasks/cancel keeping " +
    "the session, a result collected after a reconnect) and the 2025-11-25 SDK client over stdio",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const serve = await startHttpServe(fakeHome(), {
      CODEMODE_RUNTIME: "podman",
      CODEMODE_IDLE_TIMEOUT: "3s",
      CODEMODE_LOG_LEVEL: "info",
    });
    try {
      await Promise.all([longRun(serve.url), cancelRun(serve.url), reconnect(serve.url), stdioV1()]);
    } catch (error) {
      console.error(serve.stderr().slice(-4000)); // what the server logged, for a failure on a loaded machine
      throw error;
    } finally {
      await serve.stop();
    }
    await assertNoSandboxOf(podman(), serve.pid);
  },
});
