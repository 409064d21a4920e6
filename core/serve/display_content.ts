/**
 * A run's result as CallToolResult content: the rendered text, and each image display as an `image`
 * item (base64 `data`, `mimeType`) in display order, between the text parts around it when the output
 * plugin placed them.
 * @module
 */
import type { RenderedResult, RunResult } from "../contracts/output.ts";

/** One content item of a run_python result. */
export type ResultContent =
  | { type: "text"; text: string }
  | { type: "image"; data: string; mimeType: string };

/** The content items of a result: text only, unless it displayed images. */
export function resultContent(result: RunResult, rendered: RenderedResult): ResultContent[] {
  const images = (result.displays ?? []).filter((d) => d.data !== undefined && !d.dropped);
  if (!images.length) return [{ type: "text", text: rendered.text }];
  const parts = rendered.parts?.length === images.length + 1 ? rendered.parts : undefined;
  const content: ResultContent[] = [];
  const text = (value: string | undefined) => value && content.push({ type: "text", text: value });
  text(parts ? parts[0] : rendered.text);
  images.forEach((image, i) => {
    content.push({ type: "image", data: image.data!, mimeType: image.mimeType });
    if (parts) text(parts[i + 1]);
  });
  // A result is never without text: a run that only displayed still says so in words.
  if (!content.some((item) => item.type === "text")) content.unshift({ type: "text", text: rendered.text });
  return content;
}
