/**
 * Splits a byte stream into newline-delimited frames with a size cap. A line over the cap is dropped
 * whole (its bytes are skipped up to the next newline) and counted, so a hostile writer can neither
 * exhaust memory nor desynchronise the channel.
 * @module
 */

/** Reports a line that was dropped for its size. */
export type OversizeHandler = (bytes: number) => void;

const decoder = new TextDecoder();

/** Turns chunks pushed in (from 'data' events or a stream) into complete lines, dropping any over the cap. */
export class FrameSplitter {
  #maxBytes: number;
  #onOversize: OversizeHandler;
  #parts: Uint8Array[] = [];
  #size = 0;
  /** Bytes of an oversized line skipped so far; -1 while not skipping. */
  #skipped = -1;

  constructor(maxBytes: number, onOversize: OversizeHandler = () => {}) {
    this.#maxBytes = maxBytes;
    this.#onOversize = onOversize;
  }

  /** The lines `chunk` completes (without their newlines); a partial line waits for the next chunk. */
  push(chunk: Uint8Array): string[] {
    const lines: string[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      const piece = chunk.subarray(start, end);
      if (this.#skipped >= 0) {
        this.#skipped += piece.length;
      } else if (this.#size + piece.length > this.#maxBytes) {
        this.#skipped = this.#size + piece.length;
        this.#parts = [];
        this.#size = 0;
      } else if (piece.length) {
        this.#parts.push(piece);
        this.#size += piece.length;
      }
      if (nl === -1) break;
      if (this.#skipped >= 0) {
        this.#onOversize(this.#skipped);
        this.#skipped = -1;
      } else {
        lines.push(this.#take());
      }
      start = nl + 1;
    }
    return lines;
  }

  /** The end of the stream: an unterminated last line, if there is one (an oversized one is reported). */
  end(): string | undefined {
    if (this.#skipped >= 0) {
      this.#onOversize(this.#skipped);
      this.#skipped = -1;
      return undefined;
    }
    return this.#size ? this.#take() : undefined;
  }

  #take(): string {
    const parts = this.#parts;
    const line = parts.length === 1 ? decoder.decode(parts[0]) : decoder.decode(concat(parts, this.#size));
    this.#parts = [];
    this.#size = 0;
    return line;
  }
}

/** Yields complete lines (without the newline) from `stream`, dropping any over `maxBytes`. */
export async function* readFrames(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  onOversize: OversizeHandler = () => {},
): AsyncGenerator<string> {
  const splitter = new FrameSplitter(maxBytes, onOversize);
  for await (const chunk of stream) yield* splitter.push(chunk);
  const tail = splitter.end();
  if (tail !== undefined) yield tail;
}

function concat(parts: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}
