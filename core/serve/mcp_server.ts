/**
 * The MCP face of codemode: one tool, `run_python`, a capabilities resource and a stats resource. Tool
 * and argument descriptions stay short because every token here is paid in every conversation; details
 * live in `runtime.capability_summary()` and the resource. Each call gets a request id that every log
 * line of its run carries; the client may hear the run's output (progress) and log lines (logging), and
 * cancelling the request interrupts the run. A client with MCP Tasks may call `run_python` as a task
 * (tasks.ts): the call returns a task at once and the run may take up to CODEMODE_MAX_TASK_TIME.
 * @module
 */
import {
  type CallToolResult,
  type LoggingLevel,
  McpServer,
  type ServerContext,
} from "@modelcontextprotocol/server";
import * as z from "zod";
import type { OutputPlugin, RunResult } from "../contracts/output.ts";
import { log, type LogScope, withLogScope } from "../observe/log.ts";
import type { RunOptions } from "../sandbox/session.ts";
import { isLoggingLevel, logForwarder, progressStream } from "./run_notifications.ts";
import { stats } from "../observe/stats.ts";
import { resultContent } from "./display_content.ts";
import { structuredContent } from "./structured_content.ts";
import type { ArtifactStore } from "../artifacts/store.ts";
import { artifactLinks, registerArtifactResources } from "./artifact_resources.ts";
import type { ApprovalBroker } from "../host_api/approvals.ts";
import { requestApprover } from "./elicitation.ts";
import { whenInitialized } from "./prewarm.ts";
import { recordRunEnd, recordRunStart } from "./run_activity.ts";
import { requestTrace, traceRun, traceRunEnd } from "./run_trace.ts";
import { RunTasks, type TaskHandle } from "./tasks.ts";
import { serveToolCalls } from "./tool_calls.ts";

/** Runs code for a client; the session manager in production, a fake in unit tests. */
export interface CodeRunner {
  run(key: string, code: string, options: RunOptions): Promise<RunResult>;
}

/** What the MCP server needs. */
export interface McpServerOptions {
  runner: CodeRunner;
  output: OutputPlugin;
  /** Seconds used when the caller gives no timeout, and the most a caller may ask for. */
  defaultTimeout: number;
  maxTimeout: number;
  /** The most, and the default, a run called as an MCP task may take (seconds; absent: no task support). */
  maxTaskTime?: number;
  /** The text of the capabilities resource. */
  capabilities: () => string;
  /** Starts the named upstream servers ahead of the run; returns why any of them can't be (unknown, refused). */
  preload: (servers: string[]) => Promise<string[]>;
  /** Session key for this connection. */
  sessionKey: string;
  version: string;
  /** The session's artifacts: kept from its runs, listed and read as resources. */
  artifacts?: ArtifactStore;
  /** Serves codemode's skills to this client through the MCP skills extension (skills/list, skills/get). */
  skills?: { attach(server: McpServer): void };
  /** Where calls that need the user's approval are asked (through this client's elicitation). */
  approvals?: ApprovalBroker;
  /** Called once the client has initialized (to prewarm its sandbox). */
  onInitialized?: () => void;
}

/** The tasks of each MCP server this module made (for `workingTasks`). */
const TASKS = new WeakMap<McpServer, RunTasks>();

/** How many `run_python` calls made as MCP tasks are still working on `server`. */
export function workingTasks(server: McpServer): number {
  return TASKS.get(server)?.working ?? 0;
}

/** URI of the capabilities resource. */
export const CAPABILITIES_URI = "codemode://capabilities";
/** URI of the stats resource: this process's counters and latencies as JSON. */
export const STATS_URI = "codemode://stats";

const DESCRIPTION = "Run Python in a persistent sandbox (state kept between calls; top-level await). " +
  "Call any configured MCP tool: `await mcp_<server>.<tool>(**args)`. " +
  "Find tools: `from mcp import runtime; await runtime.search_tool_docs('query')`; " +
  "more: `runtime.capability_summary()`.";

/** Builds the codemode MCP server (not yet connected to a transport). */
export function createMcpServer(options: McpServerOptions): McpServer {
  const server = new McpServer(
    { name: "codemode", version: options.version },
    {
      instructions:
        "Use run_python to call MCP tools from Python; search tools with runtime.search_tool_docs.",
      capabilities: { logging: {} },
    },
  );
  if (options.onInitialized) whenInitialized(server, options.onInitialized);
  // Our own setLevel handler (replacing the SDK's) so forwarding can skip lines before building them.
  let clientLevel: LoggingLevel = "warning";
  server.server.setRequestHandler("logging/setLevel", (request) => {
    if (isLoggingLevel(request.params.level)) clientLevel = request.params.level;
    return {};
  });
  const input = z.object({
    code: z.string().describe("Python source; the last expression's value is returned"),
    timeout: z.number().positive().optional().describe(`Seconds (default ${options.defaultTimeout})`),
    servers: z.array(z.string()).optional().describe("MCP servers to start first"),
  });
  type Args = z.output<typeof input>;
  const tasks = options.maxTaskTime === undefined
    ? undefined
    : new RunTasks(server, { defaultTtlMs: (options.maxTaskTime + 3600) * 1000 });
  /** One run_python call, as a plain call or as task `task`. */
  const call = async ({ code, timeout, servers }: Args, ctx: ServerContext, task?: TaskHandle) => {
    const requestId = newRequestId(options.sessionKey, ctx, task?.id);
    // A task's notifications outlive its request: they go out on their own, tagged with the task.
    const notify = task?.notify ?? ctx.mcpReq.notify;
    const progress = progressStream(notify, ctx.mcpReq._meta?.progressToken);
    const scope: LogScope = { requestId, listener: logForwarder(notify, () => clientLevel, requestId) };
    const span = traceRun(scope, { code, session: options.sessionKey, ...requestTrace(ctx) });
    const limits = task
      ? { default: options.maxTaskTime!, max: options.maxTaskTime!, name: "CODEMODE_MAX_TASK_TIME" }
      : { default: options.defaultTimeout, max: options.maxTimeout, name: "CODEMODE_MAX_TIMEOUT" };
    let result: RunResult;
    try {
      result = await withLogScope(scope, () =>
        runPython(options, code, timeout, servers, limits, {
          requestId,
          signal: task?.signal ?? ctx.mcpReq.signal,
          onOutput: progress?.output,
          artifacts: options.artifacts,
          approve: options.approvals &&
            requestApprover(options.approvals, options.sessionKey, requestId, server.server, ctx),
        }));
      traceRunEnd(span, scope, result);
      await progress?.flush();
    } finally {
      scope.ended = true;
      span.end();
    }
    const rendered = options.output.render(result);
    if (result.artifacts?.length) server.sendResourceListChanged();
    const content = [...resultContent(result, rendered), ...artifactLinks(result)];
    return {
      content,
      structuredContent: structuredContent(rendered, content),
      isError: result.status !== "ok",
    } as CallToolResult;
  };
  const tool = server.registerTool(
    "run_python",
    { description: DESCRIPTION, inputSchema: input },
    (args, ctx) => call(args, ctx),
  );
  // registerTool takes no `execution`; tools/list shows what the registered tool has.
  if (tasks) tool.execution = { taskSupport: "optional" };
  serveToolCalls(server, {
    run_python: {
      input,
      call: (args, ctx) => call(args as Args, ctx),
      ...(tasks
        ? {
          task: (args, ctx, ttl) =>
            tasks.start(ttl, async (task) =>
              server.server.projectCallToolResult(await call(args as Args, ctx, task), undefined)),
        }
        : {}),
    },
  });
  if (tasks) {
    TASKS.set(server, tasks);
    const closed = server.server.onclose;
    server.server.onclose = () => {
      tasks.close();
      closed?.();
    };
  }
  server.registerResource(
    "capabilities",
    CAPABILITIES_URI,
    { title: "codemode capabilities", description: "What run_python can do", mimeType: "text/markdown" },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/markdown", text: options.capabilities() }] }),
  );
  if (options.artifacts) registerArtifactResources(server, options.artifacts);
  server.registerResource(
    "stats",
    STATS_URI,
    {
      title: "codemode stats",
      description: "Runs, sandboxes and tool calls of this process",
      mimeType: "application/json",
    },
    async (uri) => ({
      contents: [{
        uri: uri.href,
        mimeType: "application/json",
        text: JSON.stringify(await stats.snapshot(), null, 2),
      }],
    }),
  );
  options.skills?.attach(server);
  return server;
}

/** A short id naming the connection and the MCP request (or task): `<session>.<request id>.<random>`. */
function newRequestId(sessionKey: string, ctx: ServerContext, task?: string): string {
  // A fleet node's prefix (`node-1.`) is in every log line already: the random part tells sessions apart.
  const id = ctx.sessionId ?? sessionKey;
  const session = id.slice(id.indexOf(".") + 1, id.indexOf(".") + 9);
  const random = Math.random().toString(36).slice(2, 6);
  return `${session}.${task ? `task-${task.slice(0, 8)}` : String(ctx.mcpReq.id).slice(0, 16)}.${random}`;
}

/** How long a run may take: the default, the most a caller may ask for, and the setting that says so. */
interface TimeLimits {
  default: number;
  max: number;
  name: string;
}

async function runPython(
  options: McpServerOptions,
  code: string,
  timeout: number | undefined,
  servers: string[] | undefined,
  limits: TimeLimits,
  run: Omit<RunOptions, "timeout">,
): Promise<RunResult> {
  const seconds = Math.min(timeout ?? limits.default, limits.max);
  recordRunStart(run.requestId ?? "", options.sessionKey, code, seconds);
  const result = await execute(options, code, seconds, servers, run);
  if (timeout !== undefined && timeout > limits.max) {
    const longer = limits.name === "CODEMODE_MAX_TIMEOUT"
      ? "; for longer work use runtime.start_job() or call run_python as an MCP task"
      : "";
    result.notes = [
      `timeout lowered to the ${limits.max}s maximum (${limits.name})${longer}`,
      ...(result.notes ?? []),
    ];
  }
  recordRunEnd(run.requestId ?? "", options.sessionKey, result);
  return result;
}

async function execute(
  options: McpServerOptions,
  code: string,
  seconds: number,
  servers: string[] | undefined,
  run: Omit<RunOptions, "timeout">,
): Promise<RunResult> {
  const started = performance.now();
  try {
    if (servers?.length) {
      const problems = await options.preload(servers);
      if (problems.length) {
        return failure(`${problems.join("; ")}; see runtime.discovered_servers()`, started);
      }
    }
    log.info("run_python started", { session: options.sessionKey, timeout: seconds });
    const result = await options.runner.run(options.sessionKey, code, { ...run, timeout: seconds });
    log.info("run_python finished", { status: result.status, ms: Math.round(result.duration * 1000) });
    return { ...result };
  } catch (error) {
    log.error("run_python failed", { error: String(error) });
    return failure(`${(error as Error).message ?? error}. Run \`codemode doctor\` for a diagnosis`, started);
  }
}

function failure(message: string, started: number): RunResult {
  return {
    status: "error",
    stdout: "",
    stderr: "",
    error: message,
    duration: (performance.now() - started) / 1000,
  };
}
