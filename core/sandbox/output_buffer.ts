/**
 * Collects one stream of a run's output up to a byte cap, counting what it had to drop.
 * @module
 */
import { Buffer } from "node:buffer";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Output of one stream, capped in bytes. */
export class OutputBuffer {
  #parts: string[] = [];
  #bytes = 0;
  #dropped = 0;
  #length = 0;

  /** Creates a buffer that keeps at most `cap` bytes. */
  constructor(readonly cap: number) {}

  /** Adds text, keeping what fits under the cap. */
  append(text: string): void {
    const room = this.cap - this.#bytes;
    const size = Buffer.byteLength(text);
    if (size <= room) {
      this.#parts.push(text);
      this.#bytes += size;
      this.#length += text.length;
      return;
    }
    if (room > 0) {
      const bytes = encoder.encode(text);
      const kept = decoder.decode(bytes.subarray(0, room)).replace(/\uFFFD$/, "");
      this.#parts.push(kept);
      this.#length += kept.length;
      this.#bytes = this.cap;
      this.#dropped += bytes.length - room;
    } else {
      this.#dropped += size;
    }
  }

  /** Characters kept so far: where in text() something that happens now belongs. */
  get length(): number {
    return this.#length;
  }

  /** True when something was dropped. */
  get truncated(): boolean {
    return this.#dropped > 0;
  }

  /** What was kept. */
  text(): string {
    return this.#parts.join("");
  }

  /** A note for the result when the stream was truncated. */
  notes(stream: string): string[] {
    return this.#dropped ? [truncationNote(stream, this.#dropped, this.cap)] : [];
  }
}

/** The note a run gets when a stream was cut at the cap. */
export function truncationNote(stream: string, dropped: number, cap: number): string {
  return `${stream} truncated: ${dropped} bytes over the ${cap}-byte cap were dropped`;
}
