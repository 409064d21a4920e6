/**
 * The CLI's entry: answers `--version` (and `--help`, when the caller has it pre-rendered) before any
 * library loads, so MCP clients and CI jobs that start codemode often pay only for what they use.
 * Everything else goes to the commander program, loaded on demand.
 * @module
 */
import { versionLine } from "../core/version.ts";

/** What an entry point can hand over. */
export interface MainOptions {
  /** The top-level `--help` text, rendered at build time (the compiled binary's entry does this). */
  help?: string;
}

/** Runs the CLI with `argv` (without the program name) and returns the exit code. */
export async function main(argv: string[], options: MainOptions = {}): Promise<number> {
  // console.log, not process.stdout: Bun builds its Node stream machinery on first use of
  // process.stdout, which costs as much as the rest of the start-up.
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
    console.log(versionLine());
    return 0;
  }
  if (argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h") && options.help) {
    console.log(options.help.replace(/\n$/, ""));
    return 0;
  }
  const { runProgram } = await import("./program.ts");
  return await runProgram(argv);
}
