/**
 * The output plugin contract: how a run's result is shown to the MCP client.
 * @module
 */

/** How a run ended; "cancelled" when the client cancelled the request. */
export type RunStatus = "ok" | "error" | "timeout" | "cancelled";

/** The outcome of one `run_python` call, before rendering. */
export interface RunResult {
  status: RunStatus;
  stdout: string;
  stderr: string;
  /** repr() of the final expression's value, when the code ended with an expression that was not None. */
  value?: string;
  /** The traceback (user frames only) or a host-side error message. */
  error?: string;
  /** Wall-clock seconds the run took on the host. */
  duration: number;
  /** Notes the user must see: output truncated, session lost, and the like. */
  notes?: string[];
  /** True when the sandbox was killed and the next call starts a fresh one. */
  sessionLost?: boolean;
  /** Calls a dry run recorded instead of making (`runtime.dry_run()`), in the order they came. */
  plannedCalls?: { server: string; tool: string; arguments: Record<string, unknown> }[];
}

/** What an output plugin produces: the text content and the mirrored structuredContent. */
export interface RenderedResult {
  text: string;
  structured: Record<string, unknown>;
}

/** An output plugin: compact, toon, json. */
export interface OutputPlugin {
  readonly name: string;
  render(result: RunResult): RenderedResult;
}
