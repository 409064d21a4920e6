/**
 * A run's output with its displays in place: each text display (a table, markdown) where it was shown
 * among the printed lines, each image as a break between text parts, for the output plugins.
 * @module
 */
import type { Display, RenderedResult } from "../../core/contracts/output.ts";

/** Text, or an image that goes between the texts around it. */
export type Piece = string | { image: Display };

/** stdout with the displays placed at their offsets; dropped displays are left to the result's notes. */
export function outputPieces(stdout: string, displays: Display[] = []): Piece[] {
  const pieces: Piece[] = [];
  let at = 0;
  for (const display of displays) {
    if (display.dropped) continue;
    const offset = Math.min(Math.max(display.offset, at), stdout.length);
    if (offset > at) pieces.push(stdout.slice(at, offset));
    at = offset;
    if (display.data !== undefined) {
      pieces.push({ image: display });
    } else if (display.text) {
      const last = pieces.at(-1);
      const newline = typeof last === "string" && last && !last.endsWith("\n") ? "\n" : "";
      pieces.push(newline + display.text + (display.text.endsWith("\n") ? "" : "\n"));
    }
  }
  if (at < stdout.length) pieces.push(stdout.slice(at));
  return pieces;
}

/** Joins pieces into the text (an image as a one-line placeholder) and, with images, the parts around them. */
export function assemble(pieces: Piece[]): Pick<RenderedResult, "text" | "parts"> {
  const parts = [""];
  const images: Display[] = [];
  for (const piece of pieces) {
    if (typeof piece === "string") {
      parts[parts.length - 1] += piece;
    } else {
      images.push(piece.image);
      parts.push("");
    }
  }
  if (!images.length) return { text: parts[0] };
  const trimmed = parts.map((part) => part.replace(/^\n+/, "").replace(/\n+$/, ""));
  const text = trimmed.flatMap((part, i) => [
    ...(part ? [part] : []),
    ...(i < images.length ? [imagePlaceholder(images[i], i + 1)] : []),
  ]).join("\n");
  return { text, parts: trimmed };
}

/** The line that stands for an image in plain text. */
export function imagePlaceholder(image: Display, number: number): string {
  return `[image ${number}: ${image.mimeType}, ${formatSize(image.size)}]`;
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  return bytes < 1024 * 1024
    ? `${Number((bytes / 1024).toFixed(1))} KiB`
    : `${Number((bytes / 1024 / 1024).toFixed(1))} MiB`;
}
