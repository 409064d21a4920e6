/**
 * TOON output: the structured result encoded as Token-Oriented Object Notation.
 * @module
 */
import { encode } from "@toon-format/toon";
import type { OutputPlugin, RunResult } from "../../core/contracts/output.ts";
import { resultFields } from "./_result_fields.ts";

/** Options of the TOON output plugin (none yet; kept for the factory shape). */
export type ToonOptions = Record<never, never>;

/** Defaults of the TOON output plugin. */
export const defaults: ToonOptions = {};

/** Creates the TOON output plugin. */
export function toon(_options?: ToonOptions): OutputPlugin {
  return {
    name: "toon",
    render(result: RunResult) {
      const structured = resultFields(result);
      return { text: encode(structured), structured };
    },
  };
}
