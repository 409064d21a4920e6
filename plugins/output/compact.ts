/**
 * Compact output (the default): plain text, empty fields dropped. A run that only printed shows just
 * what it printed; anything more gets short labelled sections.
 * @module
 */
import type { OutputPlugin, RunResult } from "../../core/contracts/output.ts";
import { resultFields } from "./_result_fields.ts";

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
      return { text: compactText(result, o), structured: resultFields(result) };
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

function compactText(result: RunResult, o: CompactOptions): string {
  const sections: [string, string][] = [];
  if (result.status !== "ok") sections.push(["status", result.status]);
  if (result.stdout) sections.push(["stdout", result.stdout]);
  if (result.stderr) sections.push(["stderr", result.stderr]);
  if (result.value !== undefined && result.value !== "") sections.push(["value", result.value]);
  if (result.error) sections.push(["error", result.error]);
  for (const note of result.notes ?? []) sections.push(["note", note]);
  if (result.sessionLost) sections.push(["session", "lost; the next call starts a fresh sandbox"]);
  if (result.plannedCalls?.length) sections.push(["planned calls (not made)", plannedText(result)]);
  if (o.showDuration) sections.push(["duration", `${result.duration.toFixed(3)}s`]);

  if (sections.length === 0) return "(no output)";
  const [only] = sections;
  if (sections.length === 1 && (only[0] === "stdout" || only[0] === "value")) return only[1];
  return sections.map(([key, text]) => {
    const body = text.endsWith("\n") ? text.slice(0, -1) : text;
    return body.includes("\n") ? `${key}:\n${body}` : `${key}: ${body}`;
  }).join("\n");
}
