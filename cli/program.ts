/**
 * The command program (commander): every subcommand, its options and help. Handlers load lazily, in
 * the action, so a command loads only what it uses; nothing runs at module scope.
 * @module
 */
import { Command, CommanderError, Option } from "commander";
import { VERSION } from "../core/version.ts";
import { USAGE_ERROR } from "./exit_codes.ts";
import { registerImageCommand } from "./image.ts";

/** Builds the program; `setExit` receives the exit code a subcommand's handler returns. */
export function buildProgram(setExit: (code: number) => void = () => {}): Command {
  const program = new Command("codemode")
    .description("One MCP tool, run_python, that reaches every MCP server you have configured from a sandbox")
    .version(VERSION, "-V, --version")
    .exitOverride()
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });

  program.command("serve")
    .description(
      "Run the MCP server: stdio by default (stdout carries only protocol messages), or Streamable HTTP " +
        "with --http (one sandbox per client session); logs go to stderr",
    )
    .option("--http", "serve MCP over Streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    .option("--port <n>", "HTTP port; 0 picks a free one (default 8765)")
    .option("--host <address>", "HTTP listen address (default 127.0.0.1; others need a token)")
    .option("--token <token>", "require Authorization: Bearer <token> (better: env CODEMODE_HTTP_TOKEN)")
    .action(async (opts) => setExit(await (await import("./serve.ts")).serve(opts)));

  program.command("run")
    .description(
      "Run a Python file (or - for stdin) in the sandbox; exit 0 ok, 1 raised, 124 timeout, 2 usage",
    )
    .argument("<file>", "Python file, or - to read stdin")
    .option("--servers <list>", "comma-separated MCP servers to start first")
    .option("--timeout <seconds>", "timeout in seconds")
    .addOption(new Option("--output <format>", "result format").choices(["compact", "toon", "json"]))
    .action(async (file, opts) => setExit(await (await import("./run.ts")).runFile(file, opts)));

  program.command("search")
    .description("Fuzzy-search the tools of every configured MCP server")
    .argument("<query...>", "words to search for")
    .option("--limit <n>", "most results", "10")
    .option("--server <name>", "only this server")
    .option("--json", "print JSON for scripts")
    .action(async (query: string[], opts) =>
      setExit(await (await import("./search_command.ts")).search(query, opts))
    );

  program.command("servers")
    .description("List configured MCP servers with their source files and diagnostics")
    .option("--json", "print JSON for scripts")
    .action(async (opts) => setExit(await (await import("./servers.ts")).servers(opts)));

  program.command("tools")
    .description("List the tools of one MCP server")
    .argument("<server>", "server name")
    .option("--json", "print JSON for scripts")
    .action(async (server, opts) => setExit(await (await import("./search_command.ts")).tools(server, opts)));

  program.command("stats")
    .description("Show runs, sandboxes and tool-call latencies of every running codemode serve")
    .option("--json", "print JSON for scripts")
    .action(async (opts) => setExit(await (await import("./stats.ts")).stats(opts)));

  program.command("ui")
    .description(
      "Open the live dashboard of every codemode serve on this machine (runs, tool calls, sessions, servers, " +
        "search, policy) on 127.0.0.1; prints a one-time login URL on stderr",
    )
    .option("--port <n>", "port; 0 picks a free one (default 8766)")
    .option("--no-open", "do not open a browser; just print the login URL")
    .option("--token <token>", "also accept Authorization: Bearer <token> (default: env CODEMODE_HTTP_TOKEN)")
    .action(async (opts) => setExit(await (await import("./ui.ts")).ui(opts)));

  program.command("doctor")
    .description("Check runtimes, the sandbox image, config files and servers; print one fix per problem")
    .option("--json", "print JSON for scripts")
    .option("--quick", "skip starting each MCP server")
    .action(async (opts) => setExit(await (await import("./doctor.ts")).doctor(opts)));

  const image = program.command("image").description("Manage the sandbox image");
  registerImageCommand(image, setExit);

  program.command("completions")
    .description("Print a shell completion script")
    .argument("<shell>", "bash, zsh or fish")
    .action(async (shell) => setExit(await (await import("./completions.ts")).completions(shell, program)));

  return program;
}

/** Parses `argv` with the full program and runs the chosen command; returns the exit code. */
export async function runProgram(argv: string[]): Promise<number> {
  let exitCode = 0;
  const program = buildProgram((code) => (exitCode = code));
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : USAGE_ERROR;
    }
    process.stderr.write(`codemode: ${(error as Error).message ?? error}\n`);
    return 1;
  }
  return exitCode;
}
