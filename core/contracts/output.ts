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
  /** What the run displayed (display(), plots, rich last values), in order; dropped ones included. */
  displays?: Display[];
  /** Files the run left under /workspace/artifacts that are new or changed, as the host keeps them. */
  artifacts?: ArtifactLink[];
  /** Calls a dry run recorded instead of making (`runtime.dry_run()`), in the order they came. */
  plannedCalls?: { server: string; tool: string; arguments: Record<string, unknown> }[];
  /** What the pre-run check found (nothing ran), or the syntax error of a program that did not compile. */
  check?: CheckFinding[];
}

/** One problem the pre-run check found in a program, where it is, and how to fix it. */
export interface CheckFinding {
  /** 1-based line and column. */
  line: number;
  col: number;
  /** syntax, unknown-server, unknown-tool, unknown-argument, missing-argument, bad-value, positional, refused, ... */
  kind: string;
  message: string;
  /** One line saying what to write instead. */
  fix?: string;
}

/** One display of a run: an image, or text (a table, markdown, HTML, SVG source). */
export interface Display {
  mimeType: string;
  /** Bytes of the display's content (the decoded image, or the UTF-8 text). */
  size: number;
  /** The text itself for a text display; a short description for an image, when the sandbox gave one. */
  text?: string;
  /** The base64 image data (images only; absent when dropped). */
  data?: string;
  /** Where it came in stdout: the number of stdout characters printed before it. */
  offset: number;
  /** Left out: over the run's display cap (CODEMODE_MAX_DISPLAY). */
  dropped?: boolean;
}

/** One artifact as a result lists it: an MCP `resource_link` without its `type`. */
export interface ArtifactLink {
  /** `codemode://artifacts/<session>/<path>`: readable with `resources/read` in the same session. */
  uri: string;
  /** The path under /workspace/artifacts. */
  name: string;
  mimeType: string;
  /** Bytes. */
  size: number;
}

/** What an output plugin produces: the text content and the mirrored structuredContent. */
export interface RenderedResult {
  text: string;
  structured: Record<string, unknown>;
  /**
   * The text split around the result's images, for plugins that place them: one more part than there are
   * images with data, image i between parts i and i + 1. Without it, images follow the text.
   */
  parts?: string[];
}

/** An output plugin: compact, toon, json. */
export interface OutputPlugin {
  readonly name: string;
  render(result: RunResult): RenderedResult;
}
