/**
 * `run_python` as an MCP task (the 2025-11-25 task-augmented `tools/call`): a client that sends
 * `params.task` gets a task at once and polls it (`tasks/get`), waits for its result (`tasks/result`),
 * lists (`tasks/list`) and cancels (`tasks/cancel`) it; progress and status notifications go on after the
 * call itself returned. The MCP SDK 2.4 keeps the task wire types but no task runtime, so the task store
 * and its methods are here, with the wire shapes from `@modelcontextprotocol/ext-tasks` (core/v1).
 *
 * Tasks belong to one MCP connection (its server): over `serve --http` they live as long as the HTTP
 * session, so a client that drops its connection and comes back with the same `Mcp-Session-Id` finds them.
 * Their number and lifetime are bounded; a connection that closes cancels its working tasks.
 * @module
 */
import { randomUUID } from "node:crypto";
import {
  type CallToolResult,
  type McpServer,
  ProtocolError,
  ProtocolErrorCode,
  RELATED_TASK_META_KEY,
  type ServerCapabilities,
} from "@modelcontextprotocol/server";
import {
  CancelTaskRequestV1Schema,
  GetTaskRequestV1Schema,
  GetTaskResultRequestV1Schema,
  ListTasksRequestV1Schema,
  type TaskStatusV1,
  type TaskV1,
} from "@modelcontextprotocol/ext-tasks/core/v1";
import { log } from "../observe/log.ts";
import { stats } from "../observe/stats.ts";
import type { Notify } from "./run_notifications.ts";

/** How tasks are kept. */
export interface TaskOptions {
  /** Most tasks (working and finished) one connection keeps; a task beyond it is refused. */
  maxTasks?: number;
  /** How often clients are told to poll, in milliseconds. */
  pollIntervalMs?: number;
  /** Milliseconds a task is kept from its creation when the client asks for no `ttl`. */
  defaultTtlMs: number;
}

/** What a task's work gets: its id, the signal `tasks/cancel` aborts, and where its notifications go. */
export interface TaskHandle {
  id: string;
  signal: AbortSignal;
  /** Sends a notification about the task (not tied to the finished `tools/call` request). */
  notify: Notify;
}

/** The capability a server with these tasks declares. */
export const TASK_CAPABILITY: NonNullable<ServerCapabilities["tasks"]> = {
  list: {},
  cancel: {},
  requests: { tools: { call: {} } },
};

/** Bounds on a client's `ttl`: a task is kept at least a minute, at most a day. */
const TTL_MS = { min: 60_000, max: 24 * 3600_000 } as const;
/** A finished task is kept at least this long after it ended, whatever its ttl, so its result can be read. */
const KEPT_AFTER_END_MS = 60_000;

interface Entry {
  task: TaskV1;
  controller: AbortController;
  /** Resolves once the work ended (a cancelled task's work may take a moment to stop). */
  settled: Promise<void>;
  result?: CallToolResult;
  expires: number;
  timer?: ReturnType<typeof setTimeout>;
}

/** The tasks of one MCP connection. */
export class RunTasks {
  #server: McpServer;
  #options: Required<TaskOptions>;
  #tasks = new Map<string, Entry>();
  #closed = false;

  /** Declares task support on `server` and serves the `tasks/*` methods; call before it connects. */
  constructor(server: McpServer, options: TaskOptions) {
    this.#server = server;
    this.#options = { maxTasks: 64, pollIntervalMs: 1000, ...options };
    const s = server.server;
    s.registerCapabilities({ tasks: TASK_CAPABILITY });
    s.setRequestHandler("tasks/get", { params: GetTaskRequestV1Schema.shape.params }, (params) => // tasks/get carries no related-task _meta: the taskId is the reference.
    ({ ...this.#entry(params.taskId).task }));
    s.setRequestHandler(
      "tasks/result",
      { params: GetTaskResultRequestV1Schema.shape.params },
      (params, ctx) => this.#result(params.taskId, ctx.mcpReq.signal),
    );
    s.setRequestHandler(
      "tasks/list",
      { params: ListTasksRequestV1Schema.shape.params.unwrap().optional().default({}) },
      () => ({ tasks: [...this.#tasks.values()].map((e) => ({ ...e.task })) }),
    );
    s.setRequestHandler("tasks/cancel", { params: CancelTaskRequestV1Schema.shape.params }, (params) => {
      const entry = this.#entry(params.taskId);
      if (entry.task.status !== "working") {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `Task ${params.taskId} is already ${entry.task.status}: only a working task can be cancelled`,
        );
      }
      entry.controller.abort(new Error("tasks/cancel"));
      this.#update(entry, "cancelled", "Cancelled by the client (tasks/cancel)");
      return { ...entry.task };
    });
  }

  /** How many tasks are working. */
  get working(): number {
    let n = 0;
    for (const entry of this.#tasks.values()) if (entry.task.status === "working") n++;
    return n;
  }

  /**
   * Starts `work` as a task and returns the `CreateTaskResult` (with a text item too, for clients that look
   * at content first). `ttl` is what the client asked for, in milliseconds.
   */
  start(ttl: number | undefined, work: (task: TaskHandle) => Promise<CallToolResult>): CallToolResult {
    if (this.#closed) throw new ProtocolError(ProtocolErrorCode.InternalError, "The connection is closing");
    this.#prune();
    if (this.#tasks.size >= this.#options.maxTasks) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        `This connection keeps ${this.#options.maxTasks} tasks at most: wait for one to finish and expire`,
      );
    }
    const now = new Date().toISOString();
    const keptMs = Math.min(TTL_MS.max, Math.max(TTL_MS.min, ttl ?? this.#options.defaultTtlMs));
    const task: TaskV1 = {
      taskId: randomUUID(),
      status: "working",
      createdAt: now,
      lastUpdatedAt: now,
      ttl: keptMs,
      pollInterval: this.#options.pollIntervalMs,
    };
    const controller = new AbortController();
    let settle!: () => void;
    const entry: Entry = {
      task,
      controller,
      settled: new Promise((resolve) => (settle = resolve)),
      expires: Date.now() + keptMs,
    };
    this.#tasks.set(task.taskId, entry);
    stats.task();
    const meta = { [RELATED_TASK_META_KEY]: { taskId: task.taskId } };
    const notify: Notify = (notification) => {
      const params = notification.params as Record<string, unknown> | undefined;
      const _meta = { ...(params?._meta as Record<string, unknown> | undefined), ...meta };
      return this.#server.server.notification({ ...notification, params: { ...params, _meta } } as never);
    };
    void work({ id: task.taskId, signal: controller.signal, notify })
      .catch((error): CallToolResult => ({
        content: [{ type: "text", text: `The run failed: ${(error as Error)?.message ?? error}` }],
        isError: true,
      }))
      .then((result) => {
        entry.result = result;
        if (entry.task.status === "working") {
          this.#update(
            entry,
            result.isError ? "failed" : "completed",
            result.isError ? failureMessage(result) : undefined,
          );
        }
        settle();
        this.#arm(entry);
      });
    return {
      task: { ...task },
      content: [{ type: "text", text: `run_python is running as task ${task.taskId}; poll tasks/get` }],
    } as CallToolResult;
  }

  /** The connection closed: working tasks are cancelled (their runs interrupted), and none is kept. */
  close(): void {
    this.#closed = true;
    for (const entry of this.#tasks.values()) {
      clearTimeout(entry.timer);
      if (entry.task.status === "working") {
        entry.controller.abort(new Error("the connection closed"));
        this.#update(entry, "cancelled", "The connection closed", false);
      }
    }
    this.#tasks.clear();
  }

  #entry(taskId: string): Entry {
    this.#prune();
    const entry = this.#tasks.get(taskId);
    if (!entry) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Task not found: ${taskId}`);
    return entry;
  }

  /** Waits for the task to end (and its run to stop), then gives the run's result. */
  async #result(taskId: string, signal: AbortSignal): Promise<CallToolResult> {
    const entry = this.#entry(taskId);
    await Promise.race([
      entry.settled,
      new Promise<void>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      }),
    ]);
    const result = entry.result ?? { content: [], isError: true };
    return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId } } };
  }

  #update(entry: Entry, status: TaskStatusV1, message?: string, notify = true): void {
    entry.task.status = status;
    entry.task.lastUpdatedAt = new Date().toISOString();
    if (message) entry.task.statusMessage = message.slice(0, 500);
    if (status !== "working") stats.task(status as "completed" | "failed" | "cancelled");
    log.info("run_python task ended", { task: entry.task.taskId, status });
    if (!notify) return;
    // Optional in the protocol; clients that listen stop polling sooner.
    this.#server.server.notification(
      { method: "notifications/tasks/status", params: { ...entry.task } } as never,
    )
      .catch(() => {});
  }

  /** A finished task is dropped at its expiry, and no sooner than a minute after it ended. */
  #arm(entry: Entry): void {
    entry.expires = Math.max(entry.expires, Date.now() + KEPT_AFTER_END_MS);
    entry.timer = setTimeout(() => this.#prune(), entry.expires - Date.now() + 10);
    (entry.timer as { unref?: () => void }).unref?.();
  }

  #prune(): void {
    const now = Date.now();
    for (const [id, entry] of this.#tasks) {
      if (entry.task.status !== "working" && entry.result && entry.expires <= now) {
        clearTimeout(entry.timer);
        this.#tasks.delete(id);
      }
    }
  }
}

/** A failed result's error in one line, as the task's status message: a traceback's last line. */
function failureMessage(result: CallToolResult): string {
  const structured = result.structuredContent as { error?: unknown } | undefined;
  const item = result.content.find((c) => c.type === "text");
  const text = typeof structured?.error === "string"
    ? structured.error
    : item && "text" in item
    ? item.text
    : "";
  const lines = text.split("\n").filter((l) => l.trim());
  return (text.startsWith("Traceback") ? lines.at(-1) : lines[0]) ?? "The run failed";
}
