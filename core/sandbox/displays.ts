/**
 * A run's displays (plots, images, tables) as the sandbox sends them in `display` frames. The frames are
 * untrusted: the mime type must be on an allowlist, image data must be strict base64 that decodes to the
 * declared size and starts with its format's signature, and a run keeps at most `cap` bytes and
 * {@link MAX_DISPLAYS} displays. What does not fit is dropped, and the result's note says what.
 * @module
 */
import { Buffer } from "node:buffer";
import type { Display } from "../contracts/output.ts";
import type { SandboxFrame } from "./protocol.ts";

/** Default cap on the bytes of all displays of one run (CODEMODE_MAX_DISPLAY). */
export const DEFAULT_MAX_DISPLAY = 8 * 1024 * 1024;

/** Most displays one run keeps (dropped ones included); later ones are only counted. */
export const MAX_DISPLAYS = 500;

/** A display frame from the sandbox. */
export type DisplayFrame = Extract<SandboxFrame, { type: "display" }>;

/** Image types and the bytes each must start with; these become MCP image content. */
const IMAGE_SIGNATURES: Readonly<Record<string, readonly number[]>> = {
  "image/png": [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  "image/jpeg": [0xff, 0xd8, 0xff],
};
/** Types that travel as text and are shown as text (SVG too: few clients take SVG image content). */
const TEXT_TYPES: ReadonlySet<string> = new Set([
  "text/plain",
  "text/markdown",
  "text/html",
  "image/svg+xml",
]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** Dropped displays a note names one by one; the rest are counted. */
const NAMED_IN_NOTE = 5;

interface Pending {
  mime: string;
  declared: number;
  text?: string;
  offset: number;
  parts: string[];
  received: number;
  /** False when it did not fit under the cap: its data is checked but not kept. */
  keep: boolean;
}

/** Whether a display of this type is an image that becomes MCP image content. */
export function isImageType(mime: string): boolean {
  return Object.hasOwn(IMAGE_SIGNATURES, mime);
}

/** Collects the displays of one run. */
export class DisplayCollector {
  #displays: Display[] = [];
  #pending?: Pending;
  /** Bytes kept or reserved by the display being received. */
  #used = 0;
  /** Displays past {@link MAX_DISPLAYS}, counted only. */
  #uncounted = 0;
  /** Frames refused as malformed, and displays cut off by the end of the run. */
  #malformed = 0;

  /** Creates a collector that keeps at most `cap` bytes of displays. */
  constructor(readonly cap: number) {}

  /** Takes one display frame that came after `offset` characters of stdout; returns why it is malformed. */
  accept(frame: DisplayFrame, offset: number): string | undefined {
    const problem = this.#accept(frame, offset);
    if (problem) this.#malformed++;
    return problem;
  }

  #accept(frame: DisplayFrame, offset: number): string | undefined {
    const image = isImageType(frame.mime);
    if (!image && !TEXT_TYPES.has(frame.mime)) {
      return this.#abandon(`display type "${frame.mime.slice(0, 64)}" is not allowed`);
    }
    if (frame.dropped) {
      if (this.#pending) return this.#abandon("a dropped display interrupted another one");
      if (frame.data !== undefined || frame.more) return "a dropped display carried data";
      this.#record({ mimeType: frame.mime, size: frame.size, offset, dropped: true, ...textOf(frame) });
      return undefined;
    }
    let pending = this.#pending;
    if (pending && (pending.mime !== frame.mime || pending.declared !== frame.size)) {
      return this.#abandon("a display continued with another type or size");
    }
    if (!pending) {
      const keep = this.#displays.length < MAX_DISPLAYS && this.#used + frame.size <= this.cap;
      if (keep) this.#used += frame.size;
      pending = this.#pending = {
        mime: frame.mime,
        declared: frame.size,
        offset,
        parts: [],
        received: 0,
        keep,
      };
      if (frame.text !== undefined && image) pending.text = frame.text;
    }
    const data = frame.data ?? "";
    let bytes: number;
    if (image) {
      // Chunks concatenate into one base64 string, so only the last may be padded.
      if (data.length % 4 !== 0 || !BASE64.test(data) || (frame.more && data.endsWith("="))) {
        return this.#abandon("display data is not valid base64");
      }
      bytes = data.length / 4 * 3 - (data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0);
    } else {
      bytes = Buffer.byteLength(data);
    }
    pending.received += bytes;
    if (pending.received > pending.declared) return this.#abandon("display data is larger than declared");
    if (pending.keep) pending.parts.push(data);
    if (frame.more) return undefined;
    this.#pending = undefined;
    return this.#complete(pending, image);
  }

  /** The run's displays, and notes on what was dropped or malformed. */
  result(): { displays: Display[]; notes: string[] } {
    if (this.#pending) {
      this.#abandon("");
      this.#malformed++;
    }
    const notes: string[] = [];
    const dropped = this.#displays.filter((d) => d.dropped);
    if (dropped.length) {
      const named = dropped.slice(0, NAMED_IN_NOTE).map((d) => `${d.mimeType} (${formatBytes(d.size)})`);
      const more = dropped.length > NAMED_IN_NOTE ? ` and ${dropped.length - NAMED_IN_NOTE} more` : "";
      notes.push(
        `${dropped.length} display(s) dropped, over the ${
          formatBytes(this.cap)
        } cap on one run's displays (CODEMODE_MAX_DISPLAY): ${named.join(", ")}${more}`,
      );
    }
    if (this.#uncounted) {
      notes.push(`${this.#uncounted} more display(s) dropped: a run keeps at most ${MAX_DISPLAYS}`);
    }
    if (this.#malformed) {
      notes.push(`${this.#malformed} display frame(s) dropped as malformed (see the log for why)`);
    }
    return { displays: this.#displays, notes };
  }

  #complete(pending: Pending, image: boolean): string | undefined {
    if (image && pending.received !== pending.declared) {
      return this.#failed(pending, "display data is smaller than declared");
    }
    const base = { mimeType: pending.mime, offset: pending.offset };
    if (!pending.keep) {
      this.#record({
        ...base,
        size: pending.declared,
        dropped: true,
        ...(pending.text ? { text: pending.text } : {}),
      });
      return undefined;
    }
    const data = pending.parts.join("");
    this.#used -= pending.declared - pending.received;
    if (image) {
      const signature = IMAGE_SIGNATURES[pending.mime];
      const head = Buffer.from(data.slice(0, 16), "base64");
      if (signature.some((byte, i) => head[i] !== byte)) {
        return this.#failed(pending, `display data is not ${pending.mime}`);
      }
      this.#record({
        ...base,
        size: pending.received,
        data,
        ...(pending.text ? { text: pending.text } : {}),
      });
    } else {
      this.#record({ ...base, size: pending.received, text: data });
    }
    return undefined;
  }

  #record(display: Display): void {
    if (this.#displays.length < MAX_DISPLAYS) this.#displays.push(display);
    else this.#uncounted++;
  }

  /** Forgets the display being received (its reservation too) and says why. */
  #abandon(reason: string): string {
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending) this.#failed(pending, reason);
    return reason;
  }

  #failed(pending: Pending, reason: string): string {
    if (pending.keep) this.#used -= pending.declared;
    return reason;
  }
}

function textOf(frame: DisplayFrame): { text?: string } {
  return frame.text !== undefined && isImageType(frame.mime) ? { text: frame.text } : {};
}

/** A byte count for people: "512 B", "23.4 KiB", "8 MiB". */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const [value, unit] = bytes < 1024 * 1024 ? [bytes / 1024, "KiB"] : [bytes / 1024 / 1024, "MiB"];
  return `${Number(value.toFixed(1))} ${unit}`;
}
