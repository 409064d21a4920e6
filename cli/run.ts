/**
 * `codemode run <file|->`: runs one Python program in the same sandbox, with the same MCP proxies, as
 * `run_python`, for CI scripts. The program's stdout and stderr stream to ours as they come; the final
 * result (value, error, notes) goes to stderr. `--file` puts host files into the sandbox first (over the
 * channel); `--artifacts DIR` writes the run's artifacts to DIR. Exit code: 0 ok, 1 raised, 124 timeout,
 * 2 usage error.
 * @module
 */
import { readFile } from "node:fs/promises";
import { type FileSpec, parseFileSpecs, readFileSpecs, saveArtifacts } from "./_run_files.ts";
import type { RunResult } from "../core/contracts/output.ts";
import { loadSettings, SettingsError } from "../core/config/settings.ts";
import type { OutputPlugin } from "../core/contracts/output.ts";
import { createCodemode, defaultPlugins } from "../mod.ts";
import { type LogScope, withLogScope } from "../core/observe/log.ts";
import { environmentTrace, traceRun, traceRunEnd } from "../core/serve/run_trace.ts";

/** Flags of `codemode run`. */
export interface RunOptions {
  servers?: string;
  timeout?: string;
  output?: string;
  /** `HOST[:SANDBOX]` files to put into the sandbox before the run. */
  file?: string[];
  /** Folder the run's artifacts are written to. */
  artifacts?: string;
}

/** Exit codes of `codemode run`. */
export const EXIT = { ok: 0, raised: 1, usage: 2, timeout: 124, interrupted: 130 } as const;

const SESSION_KEY = "run";

/** Reads, runs and reports one program; resolves with the exit code. */
export async function runFile(file: string, options: RunOptions = {}): Promise<number> {
  const usage = (message: string) => {
    process.stderr.write(`codemode run: ${message}\n`);
    return EXIT.usage;
  };
  const timeout = parseTimeout(options.timeout);
  if (timeout === null) {
    return usage(`invalid --timeout "${options.timeout}"; give seconds above zero, e.g. 30`);
  }
  const servers = (options.servers ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  let code: string;
  try {
    code = await readProgram(file);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === "ENOENT"
      ? "no such file"
      : (error as Error).message;
    return usage(`cannot read "${file}": ${reason}`);
  }
  const specs = parseFileSpecs(options.file ?? []);
  if (typeof specs === "string") return usage(specs);
  let files: Awaited<ReturnType<typeof readFileSpecs>>;
  try {
    files = await readFileSpecs(specs as FileSpec[]);
  } catch (error) {
    return usage((error as Error).message);
  }
  let settings;
  try {
    settings = loadSettings();
    if (options.output) settings = { ...settings, output: options.output as typeof settings.output };
  } catch (error) {
    if (error instanceof SettingsError) return usage(error.message);
    throw error;
  }

  const plugins = defaultPlugins(settings);
  const app = await createCodemode({ settings, plugins, indexInBackground: false, tracing: true });
  let closing: Promise<void> | undefined;
  const close = () => closing ??= app.close();
  // Ctrl-C (or a CI runner's SIGTERM) must not leave a container behind.
  const interrupted = (signal: NodeJS.Signals) => {
    process.stderr.write(`\ncodemode run: ${signal}, stopping the sandbox\n`);
    void close().finally(() => process.exit(signal === "SIGINT" ? EXIT.interrupted : 143));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    if (servers.length) {
      const unknown = await app.preload(servers);
      if (unknown.length) {
        const known = app.servers.map((s) => s.name).join(", ") || "none configured";
        return usage(`unknown server(s) ${unknown.map((s) => `"${s}"`).join(", ")}; configured: ${known}`);
      }
    }
    const notes: string[] = [];
    let seconds = timeout ?? settings.timeout;
    if (seconds > settings.maxTimeout) {
      notes.push(`timeout lowered to the ${settings.maxTimeout}s maximum (raise CODEMODE_MAX_TIMEOUT)`);
      seconds = settings.maxTimeout;
    }
    let result: RunResult;
    const store = app.artifactStore(SESSION_KEY);
    try {
      if (files.length) {
        await app.sessions.putFiles(SESSION_KEY, files).catch((error: Error) => {
          throw new Error(`cannot put the --file files into the sandbox: ${error.message}`);
        });
      }
      // Traced like a run_python call, continuing the trace a CI job passes in TRACEPARENT.
      const scope: LogScope = { requestId: SESSION_KEY };
      const client = { meta: environmentTrace(process.env) };
      const span = traceRun(scope, { code, session: SESSION_KEY, name: "codemode run", client });
      try {
        result = await withLogScope(scope, () =>
          app.sessions.run(SESSION_KEY, code, {
            timeout: seconds,
            onOutput: (stream, text) => process[stream].write(text),
            artifacts: store,
            // Nobody can be asked from a script: calls that need approval follow CODEMODE_CONFIRM_FALLBACK.
            approve: app.approvals.approver(SESSION_KEY),
          }));
        traceRunEnd(span, scope, result);
      } finally {
        scope.ended = true;
        span.end();
      }
    } catch (error) {
      process.stderr.write(
        `codemode run: ${(error as Error).message ?? error}; run \`codemode doctor\` for a diagnosis\n`,
      );
      return EXIT.raised;
    }
    if (notes.length) result = { ...result, notes: [...notes, ...result.notes ?? []] };
    if (result.artifacts?.length) {
      const kept = options.artifacts
        ? await saveArtifacts(store, result.artifacts, options.artifacts)
        : undefined;
      if (typeof kept === "string") {
        process.stderr.write(`codemode run: ${kept}\n`);
        return EXIT.raised;
      }
      // The store goes with this process: list where the files are now, or say how to keep them.
      result = kept ? { ...result, artifacts: kept } : {
        ...result,
        artifacts: undefined,
        notes: [
          ...result.notes ?? [],
          `${result.artifacts.length} artifact(s) made; pass --artifacts DIR to keep them`,
        ],
      };
    }
    const summary = renderSummary(result, plugins.output(settings.output));
    if (summary) process.stderr.write(summary.endsWith("\n") ? summary : summary + "\n");
    return exitCode(result);
  } finally {
    process.off("SIGINT", interrupted);
    process.off("SIGTERM", interrupted);
    await close();
  }
}

/** The exit code a result maps to. */
export function exitCode(result: Pick<RunResult, "status">): number {
  return result.status === "ok" ? EXIT.ok : result.status === "timeout" ? EXIT.timeout : EXIT.raised;
}

/** Seconds from `--timeout`: undefined when absent, null when invalid. */
export function parseTimeout(raw: string | undefined): number | undefined | null {
  if (raw === undefined) return undefined;
  const seconds = Number(raw.trim().replace(/s$/i, ""));
  return raw.trim() !== "" && Number.isFinite(seconds) && seconds > 0 ? seconds : null;
}

/**
 * The final result in the chosen format, without the output that was already streamed; empty for a
 * clean compact run (toon and json always say something: scripts parse them).
 */
export function renderSummary(result: RunResult, output: OutputPlugin): string {
  const text = output.render({ ...result, stdout: "", stderr: "" }).text;
  return output.name === "compact" && text === "(no output)" ? "" : text;
}

async function readProgram(file: string): Promise<string> {
  if (file !== "-") return await readFile(file, "utf8");
  const chunks: Uint8Array[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Uint8Array);
  return new TextDecoder().decode(concat(chunks));
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) (out.set(c, at), at += c.length);
  return out;
}
