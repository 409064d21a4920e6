/**
 * Structured logs: one JSON object per line on stderr (stdout of `serve` belongs to the protocol).
 * @module
 */

/** Log levels, lowest first. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
/** A log level name. */
export type LogLevel = typeof LOG_LEVELS[number];

/** A sink for log lines; tests swap it for an array. */
export type LogSink = (line: string) => void;

let threshold: LogLevel = "warn";
let sink: LogSink = (line) => process.stderr.write(line + "\n");

/** Sets the lowest level that is written. */
export function setLogLevel(level: LogLevel): void {
  threshold = level;
}

/** Redirects log lines (tests, or a log file). */
export function setLogSink(next: LogSink): void {
  sink = next;
}

function write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(threshold)) return;
  sink(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }));
}

/** The project's logger. */
export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => write("debug", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => write("info", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => write("warn", msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => write("error", msg, fields),
};
