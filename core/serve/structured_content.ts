/**
 * A run's structuredContent: the output plugin's structured fields, with a large output carried once.
 * A megabyte printed back would otherwise travel twice (the text item and `structuredContent.stdout`),
 * and a client pays per byte: the SDK's stdio ReadBuffer copies its whole buffer for every chunk read, so
 * twice the bytes cost it about four times the time.
 * @module
 */
import type { RenderedResult } from "../contracts/output.ts";

/** An output of at least this many characters is carried once when the text item is exactly it. */
export const CARRIED_ONCE_CHARS = 64 * 1024;

/**
 * The structured fields, except a large `stdout` (or `value`) that the result's only text item already
 * holds whole: that field is left out and `<field>_in_text: true` says where it is.
 */
export function structuredContent(
  rendered: RenderedResult,
  content: readonly { type: string; text?: string }[],
): Record<string, unknown> {
  const texts = content.filter((item) => item.type === "text");
  if (texts.length !== 1) return rendered.structured;
  const text = texts[0].text ?? "";
  if (text.length < CARRIED_ONCE_CHARS) return rendered.structured;
  for (const field of ["stdout", "value"]) {
    if (rendered.structured[field] === text) {
      const { [field]: _carried, ...rest } = rendered.structured;
      return { ...rest, [`${field}_in_text`]: true };
    }
  }
  return rendered.structured;
}
