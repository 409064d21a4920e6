/**
 * Activity shared across processes, so one `codemode ui` shows every `serve` on the machine (the stdio
 * ones that Claude Desktop or VS Code started too). Under `<stateDir>/activity/` (0700), each serving
 * process keeps:
 *
 * - `<pid>.json`: its state (version, transport, sessions and sandboxes, servers, policy, metrics, and
 *   whatever later capabilities add), rewritten whole when it changes, at most every `stateMs`;
 * - `<pid>.events.jsonl`: its events, one JSON object a line, appended in batches every `flushMs`; past
 *   `maxBytes` the file is renamed to `<pid>.events.1.jsonl` (replacing the older one) and a new one
 *   begins, so a serve never holds more than twice `maxBytes` on disk;
 * - `<pid>.displays/`: the images its recent runs displayed, one 0600 file each, within a cap
 *   (display_files.ts); a run end event names the files of its images;
 * - `<pid>.inbox/`: messages to it (answers given on the dashboard), one 0600 file each.
 *
 * Every file is 0600 and trusted only when private (see private_files.ts). A serve removes its files
 * when it stops; readers skip and remove those of processes that are gone.
 * @module
 */
import { constants } from "node:fs";
import { type FileHandle, lstat, open, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import {
  type Activity,
  activity as processActivity,
  type ActivityEvent,
  type Attachments,
  type RunEndEvent,
} from "./activity.ts";
import { ImageBudget, imageDefaults, placeImages } from "./display_files.ts";
import { log } from "./log.ts";
import { withoutUndefined } from "../without_undefined.ts";
import {
  ensurePrivateDir,
  NotPrivateError,
  privateProblem,
  readPrivateFile,
  writePrivateFile,
} from "./private_files.ts";

/** The folder every serve publishes its activity in. */
export function activityDir(stateDir: string): string {
  return join(stateDir, "activity");
}

/** The files of one serving process. */
export function activityFiles(stateDir: string, pid: number): {
  state: string;
  events: string;
  rotated: string;
  displays: string;
  inbox: string;
} {
  const dir = activityDir(stateDir);
  return {
    state: join(dir, `${pid}.json`),
    events: join(dir, `${pid}.events.jsonl`),
    rotated: join(dir, `${pid}.events.1.jsonl`),
    displays: join(dir, `${pid}.displays`),
    inbox: join(dir, `${pid}.inbox`),
  };
}

/** Most event bytes waiting in memory for the disk; past it the oldest are dropped. */
const MAX_PENDING_BYTES = 8 * 1024 * 1024;

/** Defaults of {@link ActivityPublisherOptions}. */
export const defaults = { maxBytes: 4 * 1024 * 1024, flushMs: 100, stateMs: 500, ...imageDefaults };

/** Options of an {@link ActivityPublisher}. */
export interface ActivityPublisherOptions {
  /** The state published in `<pid>.json`; called at most every `stateMs`. */
  state: () => Promise<object> | object;
  /** The events to publish (the process-wide record by default). */
  activity?: Activity;
  /** Size at which the event log is rotated. */
  maxBytes?: number;
  /** Milliseconds events wait to be written together. */
  flushMs?: number;
  /** Milliseconds between checks of the state for changes. */
  stateMs?: number;
  /** Bytes all kept images may take (see display_files.ts). */
  maxImageBytes?: number;
  /** Runs whose images are kept. */
  maxImageRuns?: number;
}

/** Keeps this process's activity files up to date until stopped. */
export class ActivityPublisher {
  readonly files: ReturnType<typeof activityFiles>;
  #stateDir: string;
  #options: ActivityPublisherOptions & typeof defaults;
  #activity: Activity;
  #unsubscribe?: () => void;
  #events?: FileHandle;
  #size = 0;
  #pending: string[] = [];
  #pendingBytes = 0;
  #dropped = 0;
  #flushTimer?: ReturnType<typeof setTimeout>;
  #stateTimer?: ReturnType<typeof setInterval>;
  #lastState = "";
  #chain: Promise<void> = Promise.resolve();
  #stopped = false;
  #broken = false;
  #images: ImageBudget;
  #imageFailed = false;

  /** Publishes into `<stateDir>/activity/`; nothing is written until `start()`. */
  constructor(stateDir: string, options: ActivityPublisherOptions) {
    this.#stateDir = stateDir;
    this.#options = { ...defaults, ...withoutUndefined(options), state: options.state };
    this.#activity = options.activity ?? processActivity;
    this.files = activityFiles(stateDir, process.pid);
    this.#images = new ImageBudget(this.#options.maxImageBytes, this.#options.maxImageRuns);
  }

  /** Creates the files, starts listening, and writes the state now; resolves once the files exist. */
  start(): Promise<void> {
    if (this.#unsubscribe || this.#stopped) return this.#chain;
    this.#unsubscribe = this.#activity.subscribe((event, attachments) => this.#queue(event, attachments));
    this.#enqueue(async () => {
      await ensurePrivateDir(activityDir(this.#stateDir));
      await ensurePrivateDir(this.files.inbox);
      // A dead process with this pid may have left images: they are not ours to show.
      await rm(this.files.displays, { force: true, recursive: true });
      await ensurePrivateDir(this.files.displays);
      await rm(this.files.rotated, { force: true });
      this.#events = await openLog(this.files.events);
      this.#size = 0;
    });
    this.#stateTimer = setInterval(() => this.#enqueueState(), this.#options.stateMs);
    unref(this.#stateTimer);
    this.#enqueueState();
    return this.#chain;
  }

  /** Writes pending events and the current state; resolves when both are on disk. */
  async flush(): Promise<void> {
    this.#enqueueEvents();
    this.#enqueueState();
    await this.#chain;
  }

  /** Writes the state now rather than at the next check (it changed in a way a person waits on). */
  touch(): void {
    this.#enqueueState();
  }

  /** Stops publishing and removes this process's files. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#unsubscribe?.();
    clearTimeout(this.#flushTimer);
    clearInterval(this.#stateTimer);
    await this.#chain;
    await this.#events?.close().catch(() => {});
    await Promise.all(
      Object.values(this.files).map((path) => rm(path, { force: true, recursive: true }).catch(() => {})),
    );
  }

  #queue(event: ActivityEvent, attachments?: Attachments): void {
    if (this.#broken) return;
    if (event.kind === "run.end" && attachments?.images?.size && event.displays) {
      event = this.#keepImages(event, attachments.images);
    }
    const line = JSON.stringify(event);
    // Bounded in memory too: if the disk cannot keep up, the oldest waiting events are dropped.
    this.#pending.push(line);
    this.#pendingBytes += line.length + 1;
    while (this.#pendingBytes > MAX_PENDING_BYTES && this.#pending.length > 1) {
      this.#pendingBytes -= this.#pending.shift()!.length + 1;
      this.#dropped++;
    }
    if (!this.#flushTimer) {
      this.#flushTimer = setTimeout(() => this.#enqueueEvents(), this.#options.flushMs);
      unref(this.#flushTimer);
    }
  }

  /**
   * The run end with each image display naming its file (or why it was not kept); the files are written,
   * and older runs' images removed, before the event reaches the log, so a reader never finds an event
   * whose image is still missing.
   */
  #keepImages(event: RunEndEvent, images: Map<number, Uint8Array>): RunEndEvent {
    const { event: named, writes, evicted } = placeImages(event, images, this.#images);
    this.#enqueue(async () => {
      try {
        for (const image of writes) {
          await writePrivateFile(join(this.files.displays, image.name), image.bytes);
        }
        for (const name of evicted) await rm(join(this.files.displays, name), { force: true });
      } catch (error) {
        // The events go on; the page says an image it cannot load is no longer kept.
        if (!this.#imageFailed) {
          log.warn("cannot keep a run's images for the dashboard", { error: (error as Error).message });
        }
        this.#imageFailed = true;
      }
    });
    return named;
  }

  #enqueueEvents(): void {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    if (!this.#pending.length) return;
    if (this.#dropped) {
      log.warn("activity events dropped: the disk did not keep up", { dropped: this.#dropped });
      this.#dropped = 0;
    }
    const text = this.#pending.join("\n") + "\n";
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#enqueue(() => this.#append(text));
  }

  async #append(text: string): Promise<void> {
    if (!this.#events) return;
    const bytes = new TextEncoder().encode(text);
    await this.#events.write(bytes);
    this.#size += bytes.length;
    if (this.#size < this.#options.maxBytes) return;
    await this.#events.close();
    this.#events = undefined;
    await rename(this.files.events, this.files.rotated);
    this.#events = await openLog(this.files.events);
    this.#size = 0;
  }

  #enqueueState(): void {
    if (this.#stopped) return;
    this.#enqueue(async () => {
      const body = JSON.stringify(await this.#options.state());
      if (body === this.#lastState) return;
      await writePrivateFile(this.files.state, body);
      this.#lastState = body;
    });
  }

  /** Runs file work one step at a time; the first failure stops publishing (logged once). */
  #enqueue(step: () => Promise<void>): void {
    this.#chain = this.#chain.then(async () => {
      if (this.#broken) return;
      try {
        await step();
      } catch (error) {
        this.#broken = true;
        clearInterval(this.#stateTimer);
        log.warn("cannot publish activity for codemode ui; the dashboard will not show this process", {
          dir: activityDir(this.#stateDir),
          error: (error as Error).message,
        });
      }
    });
  }
}

/** A message the dashboard leaves in a serve's inbox. */
export interface InboxMessage {
  /** What the message is about (for example "approval"); handlers are registered by kind. */
  kind: string;
  [field: string]: unknown;
}

/** Handles one kind of inbox message. */
export type InboxHandler = (message: InboxMessage) => void | Promise<void>;

/**
 * The messages left for this process in `<pid>.inbox/`: read, checked (this user's private regular file
 * or refused and removed), handed to the handler of their kind, and removed. The folder is polled only
 * while some handler is registered.
 */
export class ActivityInbox {
  readonly dir: string;
  #handlers = new Map<string, InboxHandler>();
  #timer?: ReturnType<typeof setInterval>;
  #intervalMs: number;
  #reading?: Promise<void>;

  /** The inbox of process `pid` (this one by default) under `stateDir`. */
  constructor(stateDir: string, options: { pid?: number; intervalMs?: number } = {}) {
    this.dir = activityFiles(stateDir, options.pid ?? process.pid).inbox;
    this.#intervalMs = options.intervalMs ?? 200;
  }

  /** Handles messages of `kind` until the returned function is called. */
  on(kind: string, handler: InboxHandler): () => void {
    this.#handlers.set(kind, handler);
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.poll(), this.#intervalMs);
      unref(this.#timer);
    }
    return () => {
      if (this.#handlers.get(kind) === handler) this.#handlers.delete(kind);
      if (!this.#handlers.size) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  /** Reads and dispatches what is in the inbox now; resolves when every message was handled. */
  poll(): Promise<void> {
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  async #read(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((n) => /^[A-Za-z0-9_-]{1,80}\.json$/.test(n)).sort();
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(this.dir, name);
      let message: InboxMessage | undefined;
      try {
        const parsed = JSON.parse(new TextDecoder().decode(await readPrivateFile(path, 0, 64 * 1024)));
        if (parsed && typeof parsed === "object" && typeof parsed.kind === "string") message = parsed;
        else log.warn("ignored an inbox message without a kind", { file: path });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
        const why = error instanceof NotPrivateError
          ? error.message
          : `unreadable: ${(error as Error).message}`;
        log.warn("refused an inbox message", { file: path, reason: why });
      }
      // Handled or refused, a message is used once.
      await rm(path, { force: true }).catch(() => {});
      const handler = message && this.#handlers.get(message.kind);
      if (!message) continue;
      if (!handler) {
        log.info("no handler for an inbox message", { kind: message.kind });
        continue;
      }
      try {
        await handler(message);
      } catch (error) {
        log.warn("an inbox message handler failed", { kind: message.kind, error: String(error) });
      }
    }
  }
}

/** Leaves `message` in the inbox of serve `pid`; throws NotPrivateError when that inbox is not ours. */
export async function sendToInbox(stateDir: string, pid: number, message: InboxMessage): Promise<void> {
  const inbox = activityFiles(stateDir, pid).inbox;
  const problem = privateProblem(await lstat(inbox), "folder");
  if (problem) throw new NotPrivateError(inbox, problem);
  await writePrivateFile(join(inbox, `${crypto.randomUUID()}.json`), JSON.stringify(message));
}

/** A fresh 0600 log file: whatever had the name (a dead process's log, anything planted) is removed first. */
async function openLog(path: string): Promise<FileHandle> {
  await rm(path, { force: true });
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND |
    (constants.O_NOFOLLOW ?? 0);
  return await open(path, flags, 0o600);
}

function unref(timer: unknown): void {
  (timer as { unref?: () => void }).unref?.();
}
