/**
 * A stdio server's side output (stderr, and stray non-protocol lines on stdout) logged at debug level
 * under a rate limit, so a server printing megabytes can fill neither memory nor our own stderr; the last
 * few stderr lines are kept for error messages ("failed to start: ...; its stderr ends with: ..."), which
 * reach sandbox code. Every line is redacted of the server's secrets before it is kept or logged: debug
 * logs are what users attach to bug reports, and log lines also reach the MCP client of the run.
 * @module
 */
import { log } from "../observe/log.ts";
import { redact } from "./redact.ts";

/** Lines logged per second and server; the rest are counted and reported as suppressed. */
export const OUTPUT_LINES_PER_SECOND = 50;
/** Stderr lines kept for error messages. */
export const TAIL_LINES = 12;

/** Rate-limited debug logging of one server's output, plus the tail of its stderr. */
export class UpstreamOutputLog {
  #server: string;
  #secrets: readonly string[];
  #tail: string[] = [];
  #windowStart = 0;
  #inWindow = 0;
  #suppressed = 0;

  /** `secrets` are redacted from every line (before clipping, so no half secret survives). */
  constructor(server: string, secrets: readonly string[] = []) {
    this.#server = server;
    this.#secrets = secrets;
  }

  /** One line the server wrote to stderr. */
  stderr(line: string): void {
    if (!line.trim()) return;
    const redacted = redact(line, this.#secrets);
    this.#tail.push(clip(redacted, 300));
    if (this.#tail.length > TAIL_LINES) this.#tail.shift();
    this.#write("upstream stderr", redacted);
  }

  /** One line on stdout that was not an MCP message. */
  noise(line: string): void {
    this.#write("upstream stdout noise", redact(line, this.#secrets));
  }

  /** Reports how many lines the rate limit dropped since the last report. */
  flush(): void {
    if (this.#suppressed) {
      log.debug("upstream output suppressed", { server: this.#server, lines: this.#suppressed });
    }
    this.#suppressed = 0;
  }

  /** Forgets the kept stderr lines (a new process has started). */
  clear(): void {
    this.#tail = [];
  }

  /** The last few stderr lines, joined, for error messages. */
  tail(): string {
    return clip(this.#tail.join(" | "), 1200);
  }

  #write(msg: string, line: string): void {
    const now = Date.now();
    if (now - this.#windowStart >= 1000) {
      this.flush();
      this.#windowStart = now;
      this.#inWindow = 0;
    }
    if (++this.#inWindow > OUTPUT_LINES_PER_SECOND) this.#suppressed++;
    else log.debug(msg, { server: this.#server, line });
  }
}

/** `text` cut to `max` characters, with "..." when something was cut (for error messages). */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
