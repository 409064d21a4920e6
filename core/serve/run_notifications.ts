/**
 * What a client hears while its `run_python` call runs: the program's output as progress notifications
 * (when the request carries a progress token) and codemode's own log lines as MCP logging messages (at
 * or above the level the client set, `warning` until it sets one).
 * @module
 */
import type { LoggingLevel, ServerContext } from "@modelcontextprotocol/server";
import type { LogLevel, LogListener } from "../observe/log.ts";
import type { OutputListener } from "../sandbox/session.ts";

/** How often progress is sent at most, and the most text one notification carries. */
export const PROGRESS = { intervalMs: 250, maxChars: 16_384 } as const;

const FINAL_PAUSE_MS = 20;

/** Where notifications go: the request's own `notify`, so transports can route them to that request. */
export type Notify = ServerContext["mcpReq"]["notify"];

/** Streams output as progress notifications, batched so a chatty program costs a few messages a second. */
export interface ProgressStream {
  output: OutputListener;
  /** Sends what is pending and waits for every notification; call it before the result is returned. */
  flush(): Promise<void>;
}

/** A progress stream for `token`, or undefined when the client sent none. */
export function progressStream(
  notify: Notify,
  token: string | number | undefined,
  options: { intervalMs?: number; maxChars?: number } = {},
): ProgressStream | undefined {
  if (token === undefined) return undefined;
  const intervalMs = options.intervalMs ?? PROGRESS.intervalMs;
  const maxChars = options.maxChars ?? PROGRESS.maxChars;
  let pending = "";
  let skipped = 0;
  let produced = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let sending: Promise<void> = Promise.resolve();
  const send = (): boolean => {
    clearTimeout(timer);
    timer = undefined;
    if (!pending) return false;
    const message = skipped ? `[${skipped} characters not shown]\n${pending}` : pending;
    const progress = produced;
    pending = "";
    skipped = 0;
    sending = sending
      .then(() =>
        notify({ method: "notifications/progress", params: { progressToken: token, progress, message } })
      )
      .catch(() => {});
    return true;
  };
  return {
    output(_stream, text) {
      produced += text.length;
      pending += text;
      // The latest output matters most while a program runs; the result carries all of it anyway.
      if (pending.length > maxChars) {
        skipped += pending.length - maxChars;
        pending = pending.slice(-maxChars);
      }
      timer ??= setTimeout(send, intervalMs);
    },
    async flush() {
      if (!send()) return await sending;
      await sending;
      // The SDK client handles a response at once but a notification a microtask later, so a last
      // notification read in the same chunk as the response is dropped (typescript-sdk#2580); a short
      // pause makes them arrive apart.
      await new Promise((resolve) => setTimeout(resolve, FINAL_PAUSE_MS));
    },
  };
}

const MCP_LEVEL: Record<LogLevel, LoggingLevel> = {
  debug: "debug",
  info: "info",
  warn: "warning",
  error: "error",
};
const SEVERITY: Record<LoggingLevel, number> = {
  debug: 0,
  info: 1,
  notice: 2,
  warning: 3,
  error: 4,
  critical: 5,
  alert: 6,
  emergency: 7,
};

/** Forwards log lines to the client as `notifications/message` when they reach `threshold()`. */
export function logForwarder(notify: Notify, threshold: () => LoggingLevel, requestId?: string): LogListener {
  return (level, msg, fields) => {
    const mcpLevel = MCP_LEVEL[level];
    if (SEVERITY[mcpLevel] < SEVERITY[threshold()]) return;
    void notify({
      method: "notifications/message",
      params: { level: mcpLevel, logger: "codemode", data: { msg, requestId, ...fields } },
    }).catch(() => {});
  };
}

/** Whether `level` is an MCP logging level. */
export function isLoggingLevel(level: unknown): level is LoggingLevel {
  return typeof level === "string" && level in SEVERITY;
}
