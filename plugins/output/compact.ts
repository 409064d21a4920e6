/**
 * Compact output (the default): plain text, empty fields dropped. A run that only printed shows just
 * what it printed; anything more gets short labelled sections. Displays sit where they were shown: text
 * ones (tables) among the printed lines, images as breaks between the text parts around them.
 * @module
 */
import type { OutputPlugin, RenderedResult, RunResult } from "../../core/contracts/output.ts";
import { resultFields } from "./_result_fields.ts";
import { assemble, outputPieces, type Piece } from "./_displays.ts";

/** Options of the compact output plugin. */
export interface CompactOptions {
  /** Show the duration line in the text (it is always in structuredContent). */
  showDuration: boolean;
}

/** Defaults of the compact output plugin. */
export const defaults: CompactOptions = { showDuration: false };

/** Creates the compact output plugin. */
export function compact(options?: Partial<CompactOptions>): OutputPlugin {
  const o = { ...defaults, ...options };
  return {
    name: "compact",
    render(result: RunResult) {
      return { ...compactText(result, o), structured: resultFields(result) };
    },
  };
}

/** Most characters of one planned call's line; structuredContent has every argument in full. */
const PLANNED_LINE_CHARS = 300;

function plannedText(result: RunResult): string {
  return (result.plannedCalls ?? []).map(({ server, tool, arguments: args }) => {
    const line = `- ${server}/${tool} ${JSON.stringify(args)}`;
    return line.length > PLANNED_LINE_CHARS ? `${line.slice(0, PLANNED_LINE_CHARS)}…` : line;
  }).join("\n");
}

function compactText(result: RunResult, o: CompactOptions): Pick<RenderedResult, "text" | "parts"> {
  const sections: [string, Piece[]][] = [];
  const text = (key: string, value: string) => sections.push([key, [value]]);
  if (result.status !== "ok") text("status", result.status);
  // Displays (tables, images) sit among the printed lines where they were shown.
  const output = outputPieces(result.stdout, result.displays);
  if (output.length) sections.push([result.displays?.length ? "output" : "stdout", output]);
  if (result.stderr) text("stderr", result.stderr);
  if (result.value !== undefined && result.value !== "") text("value", result.value);
  if (result.error) text("error", result.error);
  for (const note of result.notes ?? []) text("note", note);
  if (result.sessionLost) text("session", "lost; the next call starts a fresh sandbox");
  for (const a of result.artifacts ?? []) {
    text("artifact", `${a.name} (${a.mimeType}, ${a.size} bytes) ${a.uri}`);
  }
  if (result.plannedCalls?.length) text("planned calls (not made)", plannedText(result));
  if (o.showDuration) text("duration", `${result.duration.toFixed(3)}s`);

  if (sections.length === 0) return { text: "(no output)" };
  const [only] = sections;
  if (sections.length === 1 && ["stdout", "output", "value"].includes(only[0])) return assemble(only[1]);
  return assemble(sections.flatMap(([key, pieces], i) => {
    const body = [...pieces];
    const last = body.at(-1);
    if (typeof last === "string" && last.endsWith("\n")) body[body.length - 1] = last.slice(0, -1);
    const multiline = body.length > 1 || typeof body[0] !== "string" || body[0].includes("\n");
    return [...(i ? ["\n"] : []), multiline ? `${key}:\n` : `${key}: `, ...body];
  }));
}
