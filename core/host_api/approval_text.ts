/**
 * The words of an approval question: the text a person reads, how refusals name the request, and the
 * arguments of a call as a person reads them (clipped, configured secrets redacted).
 * @module
 */
import { redact } from "../upstream/redact.ts";

/** What the text of a question is built from (an approval request). */
export interface QuestionParts {
  kind?: string;
  server: string;
  tool: string;
  summary: string;
  reason: string;
  text?: string;
  subject?: string;
}

/** Most characters of one argument's value, and of the whole summary, a question shows. */
export const SUMMARY_LIMITS = { value: 200, total: 800 } as const;

/** The text a person reads: who wants to call what, with which arguments, why we ask, and for how long. */
export function questionText(request: QuestionParts, timeoutSeconds: number): string {
  const call = isCall(request);
  return [
    ...call
      ? [
        `Sandbox code wants to call the tool "${request.tool}" of the MCP server "${request.server}".`,
        `Arguments: ${request.summary}`,
      ]
      : [request.text ?? request.summary],
    `Asked because ${request.reason}.`,
    `Approve ${call ? "this call" : "this"}? No answer within ${
      duration(timeoutSeconds)
    } counts as declined.`,
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
