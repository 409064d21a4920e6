/**
 * Splits a byte stream into newline-delimited frames with a size cap. A line over the cap is dropped
 * whole (its bytes are skipped up to the next newline) and counted, so a hostile writer can neither
 * exhaust memory nor desynchronise the channel.
 * @module
 */

/** Reports a line that was dropped for its size. */
export type OversizeHandler = (bytes: number) => void;

/** Yields complete lines (without the newline) from `stream`, dropping any over `maxBytes`. */
export async function* readFrames(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  onOversize: OversizeHandler = () => {},
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let parts: Uint8Array[] = [];
  let size = 0;
  let skipping = false;
  let skipped = 0;
  for await (const chunk of stream) {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      const piece = chunk.subarray(start, end);
      if (skipping) {
        skipped += piece.length;
      } else if (size + piece.length > maxBytes) {
        skipping = true;
        skipped = size + piece.length;
        parts = [];
        size = 0;
      } else if (piece.length) {
        parts.push(piece);
        size += piece.length;
      }
      if (nl === -1) break;
      if (skipping) {
        onOversize(skipped);
        skipping = false;
        skipped = 0;
      } else {
        yield decoder.decode(parts.length === 1 ? parts[0] : concat(parts, size));
      }
      parts = [];
      size = 0;
      start = nl + 1;
    }
  }
  if (skipping) onOversize(skipped);
  else if (size) yield decoder.decode(concat(parts, size));
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
