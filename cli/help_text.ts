/**
 * The top-level `--help` text as commander renders it. The compiled binary's entry imports this as a
 * Bun macro, so the text is rendered once at build time and `codemode --help` loads no parser.
 * @module
 */
import { buildProgram } from "./program.ts";

/** commander's help for the program, exactly as `codemode --help` prints it. */
export function topLevelHelp(): string {
  return buildProgram().helpInformation();
}
