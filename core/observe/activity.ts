/**
 * The activity record of one process: what its runs did, as events the dashboard shows. A run starts
 * (its code), calls tools (each with its arguments, secrets already redacted, the result's size, latency
 * and error) and ends (status, duration, output). Every event is bounded: long text is clipped here, so
 * one chatty run cannot flood the published log.
 *
 * New capabilities add event kinds (a display's image, an artifact, an approval asked and answered) as
 * new members of {@link ActivityEvent}; the dashboard gives each kind its panel and ignores kinds it
 * does not know. Recording costs nothing while nobody listens (`enabled` is false outside `serve`).
 * @module
 */
import type { CallOutcome, RunOutcome } from "./stats.ts";

/** Longest code, stdout and stderr kept per run, in characters. */
export const MAX_TEXT = 64 * 1024;
/** Longest tool arguments (as JSON), value and error kept, in characters. */
export const MAX_SMALL_TEXT = 8 * 1024;

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

/** Anything the activity record holds. Later capabilities add members (display, artifact, approval). */
export type ActivityEvent = RunStartEvent | RunEndEvent | ToolCallEvent;

/** An event as a recorder hands it in; `seq` and `at` are added. */
export type NewEvent = ActivityEvent extends infer E ? E extends ActivityEvent ? Omit<E, "seq" | "at"> : never
  : never;

/** Hears every event as it is recorded. */
export type ActivityListener = (event: ActivityEvent) => void;

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
  record(event: NewEvent): void {
    if (!this.enabled) return;
    const full = { ...clipEvent(event), seq: ++this.#seq, at: new Date().toISOString() } as ActivityEvent;
    for (const listener of this.#listeners) {
      try {
        listener(full);
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
