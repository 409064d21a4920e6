/**
 * The words of an approval question: the text a person reads (a call's, a plan's, or the opening lines
 * another kind of request brings), how refusals name the request, and the arguments of a call as a person
 * reads them (clipped, configured secrets redacted before anything is cut).
 * @module
 */
import { redact } from "../upstream/redact.ts";

/** What the text of a question is built from: the words of an approval request. */
export interface QuestionParts {
  /** What is asked about: "call" (the default) or another kind: "add_server", "plan". */
  kind?: string;
  server: string;
  /** The tool of a call; for other kinds, what the request is about (e.g. the registry name). */
  tool: string;
  /** The arguments as a person reads them: truncated, configured secrets redacted. */
  summary: string;
  /** Which rule asks, and where it was set. */
  reason: string;
  /** Kinds other than a call: the question's opening lines (a call's are built here). */
  text?: string;
  /** Kinds other than a call: how refusals name the request (`Adding "x"`). */
  subject?: string;
}

/** What a plan's question (kind "plan", runtime.plan) shows besides its calls' lines. */
export interface PlanSummary {
  /** What the program says the plan does: its own words, shown quoted, redacted and cut. */
  description: string;
  /** How many calls its rehearsal recorded. */
  calls: number;
}

/** Most characters of one argument's value, and of the whole summary, a question shows. */
export const SUMMARY_LIMITS = { value: 200, total: 800 } as const;

/**
 * The text a person reads: who wants to call what, with which arguments (or the request's own opening
 * lines), why we ask, and for how long. A plan's opening lines already say why it asks.
 */
export function questionText(request: QuestionParts, timeoutSeconds: number): string {
  const wait = `No answer within ${duration(timeoutSeconds)} counts as declined.`;
  if (request.kind === "plan") {
    return [request.text ?? request.summary, `Approve the plan? ${wait}`].join("\n");
  }
  const call = isCall(request);
  return [
    ...call
      ? [
        `Sandbox code wants to call the tool "${request.tool}" of the MCP server "${request.server}".`,
        `Arguments: ${request.summary}`,
      ]
      : [request.text ?? request.summary],
    `Asked because ${request.reason}.`,
    `Approve ${call ? "this call" : "this"}? ${wait}`,
  ].join("\n");
}

/** A plan's opening lines: what the program says it does, and every call (`lines`) it will make. */
export function planText(plan: PlanSummary, lines: string): string {
  const n = plan.calls;
  return [
    `Sandbox code asks you to approve a plan: "${plan.description}".`,
    n
      ? `If you approve, it will make ${
        n === 1 ? "this call" : `these ${n} calls`
      } (tools annotated read-only run without being asked about):`
      : "It makes no call that could change anything (tools annotated read-only run without being asked about):",
    lines,
    "Only these calls will go out, without further questions; any other call that could change something " +
    "is refused. The block's other steps run again too.",
  ].join("\n");
}

/** Whether a request is a tool call (the kind every request is unless it says otherwise). */
export function isCall(request: { kind?: string }): boolean {
  return request.kind === undefined || request.kind === "call";
}

/** How messages name a request: `Call to "server/tool"`, or the request's own subject. */
export function subjectOf(request: QuestionParts): string {
  return request.subject ?? `Call to "${request.server}/${request.tool}"`;
}

function duration(seconds: number): string {
  return seconds >= 120 && seconds % 60 === 0 ? `${seconds / 60} minutes` : `${seconds} seconds`;
}

/**
 * The arguments as a person reads them: `name=value` pairs, each value cut to a couple of hundred
 * characters and the whole to a few hundred more, with every configured secret redacted before anything
 * is cut (so a cut can never leave half a secret showing).
 */
export function summarizeArguments(args: Record<string, unknown>, secrets: readonly string[]): string {
  const entries = Object.entries(args);
  if (!entries.length) return "(none)";
  const pairs = entries.map(([name, value]) =>
    `${clip(name, secrets, 60)}=${clip(jsonText(value), secrets, SUMMARY_LIMITS.value)}`
  );
  return clip(pairs.join(", "), secrets, SUMMARY_LIMITS.total);
}

/** `text` with every configured secret redacted, then cut to `max` characters (for text a person reads). */
export function redactedText(text: string, secrets: readonly string[], max: number): string {
  return clip(text, secrets, max);
}

/**
 * `text` redacted and cut to `max` characters. Only a prefix is redacted: the first `max` characters of
 * the redacted text stand for at most `max` secrets or characters of the original, so a prefix of
 * `(max + 1) * longest` characters holds every secret that could show.
 */
function clip(text: string, secrets: readonly string[], max: number): string {
  const longest = secrets.reduce((n, s) => Math.max(n, s.length), 1);
  const scan = (max + 1) * longest;
  const redacted = redact(text.length > scan ? text.slice(0, scan) : text, secrets);
  if (text.length <= scan && redacted.length <= max) return redacted;
  return `${redacted.slice(0, max)}… (${text.length} characters)`;
}

function jsonText(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
