/**
 * Terminal safety: nothing a server, a config file or sandbox code wrote reaches a terminal as an escape
 * sequence. A terminal obeys control characters: OSC 52 writes the clipboard, OSC 0 the window title,
 * CSI 2J clears the screen, SGR 8 hides text, OSC 8 makes links, C1 controls (U+009B, U+009D) do the
 * same without ESC, BEL rings, backspace and CR overwrite. Every control character (C0 but newline and
 * tab, DEL, C1) and the bidirectional overrides that reorder text are escaped as `\uXXXX`, which is
 * readable on a terminal and valid inside a JSON string; escaping the introducer makes any sequence inert,
 * so no sequence parser is needed (strip-ansi, tried, leaves C1 controls, BEL, backspace and parts of OSC
 * 8 behind).
 *
 * Two layers. Each command escapes the data it renders (`escapeDeep`), so tables measure what they show.
 * And `guardTerminalOutput` wraps stdout and stderr so that whatever a command forgot is escaped too,
 * except codemode's own colours: the SGR sequences of the few picocolors styles it uses (a server's copy
 * of one can do no more than colour text; add a style to STYLES before using it).
 * @module
 */
import pc from "picocolors";

/** Control characters and the bidi overrides and isolates (U+202A-U+202E, U+2066-U+2069). */
// deno-lint-ignore no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** The same, plus whole SGR sequences, which the output guard looks at as one. */
const UNSAFE_OR_SGR =
  // deno-lint-ignore no-control-regex
  /\u001b\[([0-9;]*)m|[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** The styles codemode's own output uses (picocolors); SGR 8 (hidden), 5 (blink) and the rest are not. */
const STYLES = ["bold", "dim", "red", "green", "yellow", "cyan"] as const;

/** The SGR parameters of those styles, as picocolors writes them (and 0, reset). */
const PALETTE: ReadonlySet<string> = (() => {
  const codes = new Set<string>(["0"]);
  const colors = pc.createColors(true);
  for (const style of STYLES) {
    // deno-lint-ignore no-control-regex
    for (const [, code] of colors[style]("x").matchAll(/\u001b\[([0-9;]+)m/g)) codes.add(code);
  }
  return codes;
})();

function escapeChar(char: string): string {
  return `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/** `text` with every control character and bidi override escaped as `\uXXXX`; newlines and tabs stay. */
export function escapeControls(text: string): string {
  return text.replace(UNSAFE, escapeChar);
}

/** A copy of `value` with every string in it (keys too) escaped by {@link escapeControls}. */
export function escapeDeep<T>(value: T): T {
  if (typeof value === "string") return escapeControls(value) as T;
  if (Array.isArray(value)) return value.map(escapeDeep) as T;
  if (value && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [escapeControls(key), escapeDeep(item)]),
    ) as T;
  }
  return value;
}

/**
 * JSON for scripts, with control characters escaped: JSON.stringify escapes C0 but writes DEL, C1 and the
 * bidi overrides raw, and those reach a terminal that shows the JSON.
 */
export function safeJson(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(UNSAFE, escapeChar);
}

/** Text bound for a terminal: controls escaped, except SGR sequences of codemode's own palette. */
export function guardText(text: string): string {
  return text.replace(UNSAFE_OR_SGR, (match, sgr: string | undefined) => {
    if (sgr === undefined) return escapeChar(match);
    return sgr.split(";").every((code) => PALETTE.has(code || "0"))
      ? match
      : escapeChar("\u001b") + match.slice(1);
  });
}

interface Writable {
  write(chunk: unknown, ...rest: unknown[]): boolean;
}

/** The unguarded `write` of each guarded stream, for the one writer that needs raw control: a progress bar. */
const raw = new WeakMap<object, Writable["write"]>();

/**
 * Escapes what this process writes to stderr, and to stdout unless stdout carries a protocol (`serve`
 * over stdio: JSON-RPC bytes must pass untouched). Idempotent.
 */
export function guardTerminalOutput(options: { stdout: boolean }): void {
  const streams = [process.stderr, ...(options.stdout ? [process.stdout] : [])] as unknown as Writable[];
  for (const stream of streams) {
    if (raw.has(stream)) continue;
    const write = stream.write.bind(stream);
    raw.set(stream, write);
    const decoder = new TextDecoder();
    stream.write = (chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === "string") return write(guardText(chunk), ...rest);
      // Bytes are decoded as a stream, so a character split across two writes survives.
      if (chunk instanceof Uint8Array) {
        return write(guardText(decoder.decode(chunk, { stream: true })), ...rest);
      }
      return write(chunk, ...rest);
    };
  }
}

/**
 * A stream that writes to `stream` without the guard: for cli-progress, whose bar moves the cursor. What
 * it is given to show must be escaped by the caller.
 */
export function unguarded<T extends object>(stream: T): T {
  const write = raw.get(stream);
  if (!write) return stream;
  return new Proxy(stream, {
    get: (target, key) => key === "write" ? write : Reflect.get(target, key, target),
  });
}
