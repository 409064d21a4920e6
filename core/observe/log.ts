/**
 * Structured logs: one JSON object per line (`time`, `level`, `msg`, then fields) on stderr, or appended
 * to a file (stdout of `serve` belongs to the protocol). Work done for one request runs in a log scope:
 * every line written inside it, however deep (sandbox, RPC, upstream call), carries the scope's
 * `requestId`, and the scope's listener hears it (MCP logging forwards lines to the client that way).
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/** Log levels, lowest first. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
/** A log level name. */
export type LogLevel = typeof LOG_LEVELS[number];

/** A sink for log lines; tests swap it for an array. */
export type LogSink = (line: string) => void;

/** Hears every line written in a scope, whatever the threshold; it applies its own. */
export type LogListener = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** The request a piece of work belongs to. */
export interface LogScope {
  /** Added to every line written in the scope. */
  requestId?: string;
  listener?: LogListener;
  /** Set when the request is over: callbacks that outlive it (an exit noticed later) no longer claim it. */
  ended?: boolean;
}

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };
const scopes = new AsyncLocalStorage<LogScope>();
const stderrSink: LogSink = (line) => process.stderr.write(line + "\n");

let threshold = RANK.warn;
/** Fields every line of this process carries (a fleet node's id). */
let processFields: Record<string, unknown> = {};
let sink: LogSink = stderrSink;
let fileFd: number | undefined;

/** Sets the lowest level that is written. */
export function setLogLevel(level: LogLevel): void {
  threshold = RANK[level];
}

/** Adds `fields` to every line this process writes from now on (a fleet node's `node`, say). */
export function setProcessLogFields(fields: Record<string, unknown>): void {
  processFields = { ...fields };
}

/** Redirects log lines (tests, or a log file). */
export function setLogSink(next: LogSink): void {
  closeFile();
  sink = next;
}

/** Applies the log settings: level, and a file to append to instead of stderr (created if missing). */
export function configureLog(options: { level: LogLevel; file?: string }): void {
  setLogLevel(options.level);
  if (!options.file) return setLogSink(stderrSink);
  try {
    mkdirSync(dirname(options.file), { recursive: true });
    const fd = openSync(options.file, "a");
    setLogSink((line) => writeSync(fd, line + "\n"));
    fileFd = fd;
  } catch (error) {
    setLogSink(stderrSink);
    log.warn("cannot open the log file; logging to stderr", {
      file: options.file,
      error: (error as Error).message,
    });
  }
}

/** Runs `fn` (and everything it starts) inside `scope`. */
export function withLogScope<T>(scope: LogScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

/** The scope of the work in progress, if it is still open. */
export function currentLogScope(): LogScope | undefined {
  const scope = scopes.getStore();
  return scope && !scope.ended ? scope : undefined;
}

function closeFile(): void {
  if (fileFd === undefined) return;
  try {
    closeSync(fileFd);
  } catch { /* already closed */ }
  fileFd = undefined;
}

function write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  const scope = currentLogScope();
  if (scope?.listener) {
    try {
      scope.listener(level, msg, fields);
    } catch { /* a listener must never break the code that logs */ }
  }
  if (RANK[level] < threshold) return;
  const head = { time: new Date().toISOString(), level, msg, ...processFields };
  sink(
    JSON.stringify(
      scope?.requestId ? { ...head, requestId: scope.requestId, ...fields } : { ...head, ...fields },
    ),
  );
}

/** The project's logger. */
export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => write("debug", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => write("info", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => write("warn", msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => write("error", msg, fields),
  /** Whether a line at `level` would go anywhere (skip building costly fields when not). */
  enabled: (level: LogLevel): boolean => RANK[level] >= threshold || Boolean(currentLogScope()?.listener),
};
