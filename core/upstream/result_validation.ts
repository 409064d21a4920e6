/**
 * A tool's result checked against the tool's own `outputSchema`, as the MCP spec asks of clients, without
 * ever running a server's schema on the event loop. A schema is the server's code in all but name: a
 * `pattern` such as `^(a+)+$` backtracks for seconds on a string that almost matches (doubling with each
 * character), and `uniqueItems` over a large array costs the square of its length. So the SDK client is
 * built with a validator that accepts everything, and the call path calls `checkToolResult`, which hands
 * the check to a worker thread of the server's own with a deadline: a check that overruns ends the
 * worker and fails that one call with a clear error, while pings, other sessions and other servers go
 * on. Costs, measured (BENCHMARKS.md, "hostile"): a worker starts in ~0.1-0.3 s (once per server, kept
 * while used), a small result's round trip is ~0.1 ms.
 * @module
 */
import type { CallToolResult, jsonSchemaValidator, Tool } from "@modelcontextprotocol/client";
import { Worker } from "node:worker_threads";
import type { ValidationAnswer, ValidationJob } from "./result_validation_worker.ts";
import { log } from "../observe/log.ts";

/** How long one result may take to check before its worker is ended and the call fails. */
export const VALIDATION_DEADLINE_MS = 2_000;
/** A server's worker ends after this long without a check (it starts again on the next one). */
export const VALIDATION_IDLE_MS = 60_000;

/**
 * The SDK client's validator: it accepts every value, so the client never compiles or runs a server's
 * schema on the event loop; `checkToolResult` does the real check in a worker.
 */
export const acceptAllValidator = {
  getValidator: () => (input: unknown) => ({ valid: true, data: input, errorMessage: undefined }),
} as unknown as jsonSchemaValidator;

/**
 * Why `result` of `tool` does not hold to the tool's outputSchema, or undefined when it does (or the tool
 * has none, or the result is an error, which carries no structured content to check).
 */
export async function checkToolResult(
  validator: ResultValidator,
  tool: Pick<Tool, "name" | "outputSchema"> | undefined,
  result: CallToolResult,
): Promise<string | undefined> {
  if (!tool?.outputSchema || result.isError) return undefined;
  if (result.structuredContent === undefined) {
    return "the tool has an outputSchema but its result has no structuredContent";
  }
  return await validator.check(tool.outputSchema, result.structuredContent);
}

interface Pending {
  job: ValidationJob;
  resolve: (error: string | undefined) => void;
}

/** Checks values against schemas in a worker thread of its own, one at a time, each with a deadline. */
export class ResultValidator {
  #deadlineMs: number;
  #idleMs: number;
  #worker?: Worker;
  #queue: Pending[] = [];
  #running?: Pending & { timer?: ReturnType<typeof setTimeout> };
  /** Whether the worker has loaded and answers. */
  #ready = false;
  #idle?: ReturnType<typeof setTimeout>;
  #ids = new WeakMap<object, number>();
  #costly = new WeakSet<object>();
  #nextSchema = 0;
  #nextJob = 0;
  #closed = false;
  #unavailable = false;

  constructor(options: { deadlineMs?: number; idleMs?: number } = {}) {
    this.#deadlineMs = options.deadlineMs ?? VALIDATION_DEADLINE_MS;
    this.#idleMs = options.idleMs ?? VALIDATION_IDLE_MS;
  }

  /** Why `value` does not match `schema`, or undefined when it does. */
  check(schema: object, value: unknown): Promise<string | undefined> {
    if (this.#closed || this.#unavailable) return Promise.resolve(undefined);
    // A schema that overran once is not run again: each overrun costs a fresh worker (whose start holds
    // the event loop for a moment under Deno). The server's next listing brings a new schema object.
    if (this.#costly.has(schema)) return Promise.resolve(`${this.#overrunText()} before`);
    let schemaId = this.#ids.get(schema);
    if (schemaId === undefined) this.#ids.set(schema, schemaId = this.#nextSchema++);
    const job = { id: this.#nextJob++, schemaId, schema, value };
    return new Promise((resolve) => {
      this.#queue.push({ job, resolve });
      this.#next();
    });
  }

  /** Ends the worker; checks still waiting pass unchecked (the connection is closing). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#idle);
    for (const pending of this.#queue.splice(0)) pending.resolve(undefined);
    if (this.#running) {
      clearTimeout(this.#running.timer);
      this.#running.resolve(undefined);
      this.#running = undefined;
    }
    void this.#worker?.terminate();
    this.#worker = undefined;
  }

  #next(): void {
    if (this.#running || this.#closed) return;
    const pending = this.#queue.shift();
    if (!pending) {
      // An idle worker must not keep the process alive; a busy one must, until its answer comes.
      this.#worker?.unref();
      clearTimeout(this.#idle);
      this.#idle = setTimeout(() => this.#stopWorker(), this.#idleMs);
      unref(this.#idle);
      return;
    }
    clearTimeout(this.#idle);
    const worker = this.#ensureWorker();
    worker.ref();
    this.#running = { ...pending };
    // The deadline is the check's own: a worker still loading (a loaded machine) does not eat into it.
    if (this.#ready) this.#startDeadline();
    try {
      worker.postMessage(pending.job);
    } catch (error) {
      // A value that cannot be cloned is no JSON the server could have sent; say so rather than hang.
      this.#finish(pending.job.id, `it could not be checked: ${(error as Error).message}`);
    }
  }

  #ensureWorker(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(workerEntry());
    worker.unref();
    this.#ready = false;
    worker.on("message", (answer: ValidationAnswer | { ready: true }) => {
      if (worker !== this.#worker) return;
      if ("ready" in answer) {
        this.#ready = true;
        if (this.#running) this.#startDeadline();
      } else this.#finish(answer.id, answer.error);
    });
    worker.on("error", (error) => {
      if (worker !== this.#worker) return;
      this.#worker = undefined;
      const running = this.#running;
      if (!this.#ready) {
        // No worker could be started (a build without the worker's entry): results pass unchecked rather
        // than every call of a tool with an outputSchema failing; said once.
        this.#unavailable = true;
        log.warn("results cannot be checked against outputSchemas: no worker thread", {
          error: error.message,
        });
        for (const pending of [...(running ? [running] : []), ...this.#queue.splice(0)]) {
          pending.resolve(undefined);
        }
        this.#running = undefined;
        return;
      }
      if (running) this.#finish(running.job.id, `the check failed: ${error.message}`);
    });
    this.#worker = worker;
    return worker;
  }

  #startDeadline(): void {
    if (this.#running && !this.#running.timer) {
      this.#running.timer = setTimeout(() => this.#overran(), this.#deadlineMs);
    }
  }

  #finish(id: number, error: string | undefined): void {
    const running = this.#running;
    if (!running || running.job.id !== id) return;
    clearTimeout(running.timer);
    this.#running = undefined;
    running.resolve(error);
    this.#next();
  }

  /** The running check passed its deadline: end the worker (the next check starts a fresh one). */
  #overran(): void {
    const running = this.#running;
    if (!running) return;
    this.#stopWorker();
    this.#running = undefined;
    this.#costly.add(running.job.schema as object);
    running.resolve(`${this.#overrunText()}, so it was stopped`);
    this.#next();
  }

  #overrunText(): string {
    return `checking results against the tool's outputSchema took longer than ${this.#deadlineMs} ms ` +
      `(a schema whose patterns backtrack, or a very large result)`;
  }

  #stopWorker(): void {
    const worker = this.#worker;
    this.#worker = undefined;
    this.#ready = false;
    void worker?.terminate();
  }
}

/**
 * Where the worker's module is: beside this one, except in a binary compiled by Bun (scripts/compile.sh),
 * whose modules share one virtual folder while the worker, an entry of its own, keeps its repository path.
 * Bundled to JavaScript (the npm package, scripts/build_npm.ts), the worker is an entry of its own too,
 * built beside the bundle's chunks.
 */
function workerEntry(): URL | string {
  if (import.meta.url.startsWith("file:///$bunfs/")) return "./core/upstream/result_validation_worker.ts";
  if (import.meta.url.endsWith(".js")) return new URL("./result_validation_worker.js", import.meta.url);
  return new URL("./result_validation_worker.ts", import.meta.url);
}

function unref(timer: ReturnType<typeof setTimeout>): void {
  (timer as { unref?: () => void }).unref?.();
}
