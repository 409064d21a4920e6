/**
 * JSON output: the structured result as one JSON document.
 * @module
 */
import type { OutputPlugin, RunResult } from "../../core/contracts/output.ts";
import { resultFields } from "./_result_fields.ts";

/** Options of the JSON output plugin. */
export interface JsonOptions {
  /** Indentation; 0 keeps the text on one line (fewest tokens). */
  indent: number;
}

/** Defaults of the JSON output plugin. */
export const defaults: JsonOptions = { indent: 0 };

/** Creates the JSON output plugin. */
export function json(options?: Partial<JsonOptions>): OutputPlugin {
  const o = { ...defaults, ...options };
  return {
    name: "json",
    render(result: RunResult) {
      const structured = resultFields(result);
      return { text: JSON.stringify(structured, null, o.indent || undefined), structured };
    },
  };
}
