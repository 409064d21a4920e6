/**
 * Takes one run's artifact frames into the session's store. Every frame is untrusted: its path must pass
 * the rules, its pieces must come in order as valid base64, its bytes count against the caps as they
 * arrive, and a file that breaks any of this is dropped whole and named in a note. A refused file never
 * stops the others, and never fails the run.
 * @module
 */
import type { ArtifactLink, RunResult } from "../contracts/output.ts";
import { artifactPathProblem, quotePath } from "../artifacts/paths.ts";
import type { ArtifactStore, Incoming, Refusal } from "../artifacts/store.ts";
import type { ARTIFACT_SKIP_REASONS, SandboxFrame } from "./protocol.ts";
import { Buffer } from "node:buffer";

/** A piece of an artifact, as the sandbox sends it. */
export type ArtifactFrame = Extract<SandboxFrame, { type: "artifact" }>;
/** A file the sandbox left out, and why. */
export type ArtifactSkippedFrame = Extract<SandboxFrame, { type: "artifact_skipped" }>;

/** What a run's artifacts came to: the files kept, and notes on the ones that were not. */
export interface ReceivedArtifacts {
  links: ArtifactLink[];
  notes: string[];
}

/** Most files one run sends back as artifacts (the sandbox is told, and the host holds it to that). */
export const MAX_ARTIFACTS_PER_RUN = 100;
/** Where sandbox code leaves artifacts. */
export const ARTIFACTS_DIR = "/workspace/artifacts";

/** Most notes about artifacts one result carries; the rest are counted in a last note. */
const MAX_NOTES = 20;

const SKIPPED: Record<(typeof ARTIFACT_SKIP_REASONS)[number], string> = {
  too_large: "", // worded from the cap, below
  hidden: "hidden files and folders are not collected",
  symlink: "it is a symbolic link, which is not followed (save the file itself)",
  not_regular: "it is not a regular file (a FIFO, socket or device)",
  unreadable: "the sandbox could not read it",
  too_many: "the run left more files than are collected at once",
  bad_name: "its name has a control character, backslash or colon, or is not UTF-8",
};

/** One run's artifact frames on their way into `store`. */
export class ArtifactReceiver {
  #store: ArtifactStore;
  #maxFiles: number;
  #open = new Map<string, Incoming>();
  /** Paths already refused in this run: their later pieces are dropped without another note. */
  #refused = new Set<string>();
  #links: ArtifactLink[] = [];
  #notes: string[] = [];
  #moreNotes = 0;
  #files = 0;
  #malformed: (reason: string) => void;

  /** A receiver for one run; `malformed` counts frames that break the protocol. */
  constructor(store: ArtifactStore, maxFiles: number, malformed: (reason: string) => void) {
    this.#store = store;
    this.#maxFiles = maxFiles;
    this.#malformed = malformed;
  }

  /** Takes one frame; frames must be taken one at a time, in order. */
  async take(frame: ArtifactFrame | ArtifactSkippedFrame): Promise<void> {
    if (frame.type === "artifact_skipped") return this.#skipped(frame);
    const { path } = frame;
    if (this.#refused.has(path)) return;
    const problem = artifactPathProblem(path);
    if (problem) return this.#refuse(path, `was refused: ${problem}`, true);
    let incoming = this.#open.get(path);
    if (!incoming) {
      if (frame.offset !== 0) return this.#refuse(path, "was dropped: its pieces came out of order", true);
      // The sandbox sends one file at a time: one that begins ends any other left unfinished.
      for (const [other, unfinished] of this.#open) {
        await this.#drop(
          other,
          unfinished,
          "was dropped: another file began before it had fully arrived",
          true,
        );
      }
      if (this.#files >= this.#maxFiles) {
        return this.#refuse(path, `was left out: at most ${this.#maxFiles} artifacts are collected per run`);
      }
      this.#files++;
      const started = await this.#store.receive(path, frame.size).catch((error: Error) => ({
        reason: "failed" as const,
        note: `the host could not keep it: ${error.message}`,
      }));
      if ("reason" in started) return this.#refuse(path, leftOut(started));
      incoming = started;
      this.#open.set(path, incoming);
    }
    if (frame.offset !== incoming.size) {
      return this.#drop(path, incoming, "was dropped: its pieces came out of order", true);
    }
    const bytes = strictBase64(frame.data);
    if (!bytes) return this.#drop(path, incoming, "was dropped: a piece was not valid base64", true);
    const refusal = await incoming.write(bytes).catch((error: Error) => ({
      reason: "failed" as const,
      note: `the host could not keep it: ${error.message}`,
    }));
    if (refusal) return this.#drop(path, incoming, leftOut(refusal));
    if (!frame.end) return;
    this.#open.delete(path);
    if (frame.size !== undefined && frame.size !== incoming.size) {
      await incoming.abort();
      return this.#refuse(path, "was dropped: its size does not match what was announced", true);
    }
    const kept = await incoming.commit();
    if ("reason" in kept) return this.#refuse(path, leftOut(kept));
    this.#links = this.#links.filter((link) => link.name !== kept.path);
    this.#links.push(this.#store.link(kept));
  }

  /** Ends the run: unfinished files are dropped; returns what was kept and the notes. */
  async finish(): Promise<ReceivedArtifacts> {
    for (const [path, incoming] of this.#open) {
      await this.#drop(path, incoming, "was dropped: it had not fully arrived when the run ended");
    }
    const notes = [...this.#notes];
    if (this.#moreNotes) notes.push(`${this.#moreNotes} more artifact(s) were left out`);
    return { links: this.#links, notes };
  }

  async #skipped(frame: ArtifactSkippedFrame): Promise<void> {
    if (this.#refused.has(frame.path)) return;
    const open = this.#open.get(frame.path);
    if (open) {
      this.#open.delete(frame.path);
      await open.abort();
    }
    if (frame.reason !== "too_large") {
      return this.#refuse(frame.path, `was left out: ${SKIPPED[frame.reason]}`);
    }
    const refusal = this.#store.overCap(frame.path, frame.size ?? Number.MAX_SAFE_INTEGER, 0);
    this.#refuse(frame.path, refusal ? leftOut(refusal) : "was left out: it is too large");
  }

  async #drop(path: string, incoming: Incoming, why: string, malformed = false): Promise<void> {
    this.#open.delete(path);
    await incoming.abort();
    this.#refuse(path, why, malformed);
  }

  #refuse(path: string, why: string, malformed = false): void {
    if (this.#refused.size < 10_000) this.#refused.add(path);
    if (malformed) this.#malformed(`artifact ${quotePath(path)} ${why}`);
    if (this.#notes.length < MAX_NOTES) this.#notes.push(`artifact ${quotePath(path)} ${why}`);
    else this.#moreNotes++;
  }
}

/** `result` with the run's artifacts listed and the notes on those left out added. */
export function withArtifacts(result: RunResult, received: ReceivedArtifacts | undefined): RunResult {
  if (!received || (received.links.length === 0 && received.notes.length === 0)) return result;
  return {
    ...result,
    ...(received.links.length ? { artifacts: received.links } : {}),
    notes: [...(result.notes ?? []), ...received.notes],
  };
}

/**
 * Decodes padded base64 (standard or URL-safe alphabet), or undefined when `text` is anything else.
 * Node's decoder skips characters it does not know and stops at padding, so any such text decodes short:
 * comparing lengths catches it without a pass of a regular expression over megabytes.
 */
export function strictBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0) return undefined;
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const bytes = Buffer.from(text, "base64");
  return bytes.length === (text.length / 4) * 3 - padding ? bytes : undefined;
}

function leftOut(refusal: Refusal): string {
  return `was left out: ${refusal.note}`;
}
