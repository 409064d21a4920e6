/**
 * The command program (commander): every subcommand, its options and help. Handlers load lazily, in
 * the action, so a command loads only what it uses; nothing runs at module scope.
 * @module
 */
import { Command, CommanderError, Option } from "commander";
import { versionLine } from "../core/version.ts";
import { USAGE_ERROR } from "./exit_codes.ts";
import { registerImageCommand } from "./image.ts";
import { escapeControls, guardTerminalOutput } from "./_terminal_guard.ts";

/** Builds the program; `setExit` receives the exit code a subcommand's handler returns. */
export function buildProgram(setExit: (code: number) => void = () => {}): Command {
  const program = new Command("codemode")
    .description("One MCP tool, run_python, that reaches every MCP server you have configured from a sandbox")
    .version(versionLine(), "-V, --version")
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
    .option(
      "--allowed-hosts <names>",
      "host names clients reach it by through a balancer, comma-separated (env CODEMODE_ALLOWED_HOSTS)",
    )
    .action(async (opts) => setExit(await (await import("./serve.ts")).serve(opts)));

  program.command("run")
    .description(
      "Run a Python file (or - for stdin) in the sandbox; exit 0 ok, 1 raised, 124 timeout, 2 usage",
    )
    .argument("<file>", "Python file, or - to read stdin")
    .option("--servers <list>", "comma-separated MCP servers to start first")
    .option("--timeout <seconds>", "timeout in seconds")
    .addOption(new Option("--output <format>", "result format").choices(["compact", "toon", "json"]))
    .option(
      "--file <host[:sandbox]>",
      "put a host file into the sandbox first (default /workspace/<name>); repeatable",
      (value: string, list: string[] = []) => [...list, value],
    )
    .option("--artifacts <dir>", "write the run's artifacts (files left in /workspace/artifacts) to DIR")
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

  program.command("stubs")
    .description("Print the Python stubs (.pyi) of MCP servers' tools, or write them for editors")
    .argument("[servers...]", "server names or aliases (default: every configured server)")
    .option("--out <dir>", "write DIR/mcp/servers/<alias>.pyi instead of printing")
    .action(async (servers: string[], opts) =>
      setExit(await (await import("./stubs.ts")).stubs(servers, opts))
    );

  const auth = program.command("auth")
    .description("Log in to remote MCP servers that require OAuth, show and end those logins");
  auth.command("login")
    .description("Log in to a remote MCP server with OAuth (opens a browser) and store its tokens")
    .argument("<server>", "server name, as `codemode servers` lists it")
    .option("--no-browser", "print the login URL instead of opening a browser")
    .action(async (server, opts) => setExit(await (await import("./auth.ts")).authLogin(server, opts)));
  auth.command("status")
    .description("Show which remote MCP servers are logged in, when their tokens expire and their scopes")
    .option("--json", "print JSON for scripts: [{server, loggedIn, expiresAt, scopes}]")
    .action(async (opts) => setExit(await (await import("./auth.ts")).authStatus(opts)));
  auth.command("logout")
    .description("Revoke (where the server supports it) and delete the stored tokens of a remote MCP server")
    .argument("<server>", "server name")
    .action(async (server) => setExit(await (await import("./auth.ts")).authLogout(server)));

  program.command("stats")
    .description("Show runs, sandboxes and tool-call latencies of every running codemode serve")
    .option("--json", "print JSON for scripts")
    .action(async (opts) => setExit(await (await import("./stats.ts")).stats(opts)));

  program.command("ui")
    .description(
      "Open the live dashboard of every codemode serve on this machine (runs with their displays and " +
        "artifacts, tool calls, pending approvals, sessions, servers, skills, search, policy) on 127.0.0.1; " +
        "prints a one-time login URL on stderr",
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

  const skills = program.command("skills")
    .description("List, show, remove and check saved skills (code and know-how sandbox code reuses)");
  skills.command("list")
    .description("List the skills of every skill directory, and those that failed to load")
    .option("--json", "print JSON for scripts")
    .action(async (opts) => setExit(await (await import("./skills.ts")).list(opts)));
  skills.command("show")
    .description("Print a skill's SKILL.md and code")
    .argument("<name>", "skill name (hyphens or underscores)")
    .option("--json", "print JSON for scripts")
    .action(async (name, opts) => setExit(await (await import("./skills.ts")).show(name, opts)));
  skills.command("rm")
    .description("Remove a skill's folder")
    .argument("<name>", "skill name (hyphens or underscores)")
    .option("--json", "print JSON for scripts")
    .action(async (name, opts) => setExit(await (await import("./skills.ts")).rm(name, opts)));
  skills.command("check")
    .description(
      "Check each skill's MCP tool calls against the servers' current tools; exit 1 on any finding",
    )
    .option("--json", "print JSON for scripts")
    .action(async (opts) => setExit(await (await import("./skills.ts")).check(opts)));

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
  // Every command's output passes the terminal guard; stdout of `serve` over stdio is the protocol's.
  guardTerminalOutput({ stdout: !(argv[0] === "serve" && !argv.includes("--http")) });
  let exitCode = 0;
  const program = buildProgram((code) => (exitCode = code));
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : USAGE_ERROR;
    }
    process.stderr.write(`codemode: ${escapeControls(String((error as Error).message ?? error))}\n`);
    return 1;
  }
  return exitCode;
}
