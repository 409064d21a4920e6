/**
 * The structured form of a run result that every output plugin mirrors: empty fields dropped; displays
 * as `{mimeType, size, text?, dropped?}` (image data travels as image content, not here).
 * @module
 */
import type { RunResult } from "../../core/contracts/output.ts";

/** The run result as a plain object with empty fields dropped; duration rounded to milliseconds. */
export function resultFields(result: RunResult): Record<string, unknown> {
  const fields: Record<string, unknown> = { status: result.status };
  if (result.stdout) fields.stdout = result.stdout;
  if (result.stderr) fields.stderr = result.stderr;
  if (result.value !== undefined && result.value !== "") fields.value = result.value;
  if (result.error) fields.error = result.error;
  if (result.notes?.length) fields.notes = result.notes;
  if (result.sessionLost) fields.session_lost = true;
  if (result.displays?.length) {
    fields.displays = result.displays.map((d) => ({
      mimeType: d.mimeType,
      size: d.size,
      ...(d.text !== undefined ? { text: d.text } : {}),
      ...(d.dropped ? { dropped: true } : {}),
    }));
  }
  if (result.artifacts?.length) fields.artifacts = result.artifacts;
  if (result.plannedCalls?.length) fields.planned_calls = result.plannedCalls;
  if (result.check?.length) fields.check = result.check;
  fields.duration = Math.round(result.duration * 1000) / 1000;
  return fields;
}
