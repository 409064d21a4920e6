/**
 * The activity record of one process: what its runs did, as events the dashboard shows. A run starts
 * (its code), calls tools (each with its arguments, secrets already redacted, the result's size, latency
 * and error) and ends (status, duration, output). Every event is bounded: long text is clipped here, so
 * one chatty run cannot flood the published log.
 *
 * A run's end also lists its displays (text tables inline, clipped; images only by reference: their bytes
 * travel beside the event as {@link Attachments}, and the publisher keeps them as files of their own) and
 * its artifacts; approvals add events of their own when a question is asked and when it closes. The
 * dashboard gives each kind its panel and ignores kinds it does not know. Recording costs nothing while
 * nobody listens (`enabled` is false outside `serve`).
 * @module
 */
import type { CallOutcome, RunOutcome } from "./stats.ts";

/** Longest code, stdout and stderr kept per run, in characters. */
export const MAX_TEXT = 64 * 1024;
/** Longest tool arguments (as JSON), value and error kept, in characters. */
export const MAX_SMALL_TEXT = 8 * 1024;
/** Longest text of one text display (a table, markdown, SVG or HTML source) kept, in characters. */
export const MAX_DISPLAY_TEXT = 16 * 1024;
/** Most characters of display text one run keeps in all; later texts are left out (and said so). */
export const MAX_DISPLAY_TEXT_TOTAL = 64 * 1024;
/** Most displays and artifacts one run end lists; the rest are counted. */
export const MAX_LISTED = 100;

/** What every event carries: its order in this process, and when it happened. */
export interface EventBase {
  /** Grows by one per event of this process; the dashboard orders and deduplicates by it. */
  seq: number;
  /** ISO time. */
  at: string;
}

/** A run_python call began. */
export interface RunStartEvent extends EventBase {
  kind: "run.start";
  /** The run's request id; the events of one run share it. */
  run: string;
  /** The client session the run belongs to (the key of its sandbox session). */
  session: string;
  code: string;
  /** Seconds the run may take. */
  timeout: number;
}

/** A run_python call ended. */
export interface RunEndEvent extends EventBase {
  kind: "run.end";
  run: string;
  session: string;
  status: RunOutcome;
  /** Wall-clock milliseconds on the host. */
  ms: number;
  stdout: string;
  stderr: string;
  value?: string;
  error?: string;
  notes?: string[];
  sessionLost?: boolean;
  /** What the run displayed, in order (at most {@link MAX_LISTED}). */
  displays?: DisplayEntry[];
  /** Displays past {@link MAX_LISTED}, counted only. */
  displaysOmitted?: number;
  /** The files the run left as artifacts (at most {@link MAX_LISTED}). */
  artifacts?: ArtifactEntry[];
  /** Artifacts past {@link MAX_LISTED}, counted only. */
  artifactsOmitted?: number;
}

/** One display of a run as the activity log keeps it. */
export interface DisplayEntry {
  mimeType: string;
  /** Bytes of the display's content. */
  size: number;
  /** A text display's text (clipped), or an image's short description. */
  text?: string;
  /** Left out of the run's result: over CODEMODE_MAX_DISPLAY. */
  dropped?: boolean;
  /** An image's file beside the activity (`<pid>.displays/<file>`), once the publisher kept it. */
  file?: string;
  /** Why an image or a text is not kept in the activity (too large, over the run's share). */
  notKept?: string;
}

/** One artifact of a run: the `resource_link` its result listed. */
export interface ArtifactEntry {
  /** `codemode://artifacts/<session>/<path>`. */
  uri: string;
  /** Its path under /workspace/artifacts. */
  name: string;
  mimeType: string;
  size: number;
}

/** Sandbox code called an upstream tool. */
export interface ToolCallEvent extends EventBase {
  kind: "tool.call";
  /** The run that made the call, when known. */
  run?: string;
  server: string;
  tool: string;
  /** The arguments as JSON, secrets redacted, clipped to {@link MAX_SMALL_TEXT}. */
  args: string;
  /** Size of the result in characters of JSON, when the call returned one. */
  resultBytes?: number;
  ms: number;
  outcome: CallOutcome;
  error?: string;
}

/** What an approval question was about, as its events carry it. */
interface ApprovalFields {
  /** The run whose call waits (its request id), when known. */
  run?: string;
  /** The question's id (the dashboard answers by it). */
  id: string;
  session: string;
  /** What is asked about when it is not a tool call (e.g. "add_server"). */
  about?: string;
  server: string;
  tool: string;
  /** The arguments as the question shows them: clipped, configured secrets redacted. */
  summary: string;
  reason: string;
}

/** A call waits for a person's approval. */
export interface ApprovalAskedEvent extends EventBase, ApprovalFields {
  kind: "approval.asked";
  /** Whether the MCP client was asked too (else only the dashboard can answer). */
  client: boolean;
  expiresAt: string;
}

/** An approval question closed. */
export interface ApprovalClosedEvent extends EventBase, ApprovalFields {
  kind: "approval.closed";
  /** approved, declined, cancelled, timeout. */
  outcome: string;
  scope?: string;
  /** Who answered: "client" (its elicitation form) or "dashboard"; absent when nobody did. */
  via?: string;
}

/** Sandbox code searched an MCP registry (`runtime.find_servers`). */
export interface RegistryFindEvent extends EventBase {
  kind: "registry.find";
  run?: string;
  session: string;
  /** The registry's host. */
  registry: string;
  query: string;
  /** Entries returned, and entries left out as oversized or malformed. */
  results: number;
  leftOut: number;
  ms: number;
  error?: string;
}

/** Sandbox code asked to add a registry server (`runtime.add_server`), and how that ended. */
export interface ServerAddEvent extends EventBase {
  kind: "server.add";
  run?: string;
  session: string;
  /** The registry name asked for. */
  name: string;
  version?: string;
  alias?: string;
  /** What runs: the command line or the URL. */
  runs?: string;
  /** added, refused (policy or entry), declined (by the user), failed (it did not start). */
  outcome: "added" | "refused" | "declined" | "failed";
  why?: string;
  tools?: number;
  /** The config file it was kept in, when the user chose to keep it. */
  kept?: string;
}

/** Sandbox code removed a server it had added (`runtime.remove_server`). */
export interface ServerRemoveEvent extends EventBase {
  kind: "server.remove";
  run?: string;
  session: string;
  alias: string;
  name: string;
}

/** Anything the activity record holds. */
export type ActivityEvent =
  | RunStartEvent
  | RunEndEvent
  | ToolCallEvent
  | ApprovalAskedEvent
  | ApprovalClosedEvent
  | RegistryFindEvent
  | ServerAddEvent
  | ServerRemoveEvent;

/**
 * What travels with an event to the listeners but never into the log: the bytes of a run's images, by
 * their index in the run end's `displays`.
 */
export interface Attachments {
  images?: Map<number, Uint8Array>;
}

/** An event as a recorder hands it in; `seq` and `at` are added. */
export type NewEvent = ActivityEvent extends infer E ? E extends ActivityEvent ? Omit<E, "seq" | "at"> : never
  : never;

/** Hears every event as it is recorded, with its attachments. */
export type ActivityListener = (event: ActivityEvent, attachments?: Attachments) => void;

/** The events of one process, handed to whoever listens (the publisher in a `serve`). */
export class Activity {
  #listeners = new Set<ActivityListener>();
  #seq = 0;

  /** Whether anyone listens; recorders skip building events (and redacting arguments) when not. */
  get enabled(): boolean {
    return this.#listeners.size > 0;
  }

  /** Adds a listener; returns the function that removes it. */
  subscribe(listener: ActivityListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Records one event (clipping its text); no-op while nobody listens. */
  record(event: NewEvent, attachments?: Attachments): void {
    if (!this.enabled) return;
    const full = { ...clipEvent(event), seq: ++this.#seq, at: new Date().toISOString() } as ActivityEvent;
    for (const listener of this.#listeners) {
      try {
        listener(full, attachments);
      } catch { /* a listener must never break the run that records */ }
    }
  }
}

/** The process-wide activity record. */
export const activity = new Activity();

/** `text` cut to `max` characters, saying how much was left out. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[${text.length - max} more characters not kept in the activity log]`;
}

function clipEvent(event: NewEvent): NewEvent {
  switch (event.kind) {
    case "run.start":
      return { ...event, code: clip(event.code, MAX_TEXT) };
    case "run.end":
      return {
        ...event,
        stdout: clip(event.stdout, MAX_TEXT),
        stderr: clip(event.stderr, MAX_TEXT),
        ...(event.value !== undefined ? { value: clip(event.value, MAX_SMALL_TEXT) } : {}),
        ...(event.error !== undefined ? { error: clip(event.error, MAX_SMALL_TEXT) } : {}),
        ...(event.displays ? clipDisplays(event.displays, event.displaysOmitted ?? 0) : {}),
        ...(event.artifacts ? clipArtifacts(event.artifacts, event.artifactsOmitted ?? 0) : {}),
      };
    case "tool.call":
      return {
        ...event,
        args: clip(event.args, MAX_SMALL_TEXT),
        ...(event.error !== undefined ? { error: clip(event.error, MAX_SMALL_TEXT) } : {}),
      };
    default:
      return event;
  }
}

/** A run's displays as the log keeps them: at most {@link MAX_LISTED}, their text clipped, in all capped. */
function clipDisplays(
  displays: DisplayEntry[],
  omitted: number,
): Pick<RunEndEvent, "displays" | "displaysOmitted"> {
  let budget = MAX_DISPLAY_TEXT_TOTAL;
  const kept = displays.slice(0, MAX_LISTED).map((d): DisplayEntry => {
    if (d.text === undefined) return d;
    if (budget <= 0) {
      const { text: _, ...rest } = d;
      return { ...rest, notKept: `the run's displays passed ${MAX_DISPLAY_TEXT_TOTAL / 1024} KiB of text` };
    }
    const max = Math.min(MAX_DISPLAY_TEXT, budget);
    budget -= Math.min(d.text.length, max);
    return { ...d, text: clip(d.text, max) };
  });
  const more = omitted + Math.max(0, displays.length - MAX_LISTED);
  return { displays: kept, ...(more ? { displaysOmitted: more } : {}) };
}

function clipArtifacts(
  artifacts: ArtifactEntry[],
  omitted: number,
): Pick<RunEndEvent, "artifacts" | "artifactsOmitted"> {
  const more = omitted + Math.max(0, artifacts.length - MAX_LISTED);
  return { artifacts: artifacts.slice(0, MAX_LISTED), ...(more ? { artifactsOmitted: more } : {}) };
}
