/**
 * Terminal helpers shared by the subcommands: colour that honours NO_COLOR and non-terminals, status
 * marks, tables, and JSON for scripts.
 * @module
 */
import Table from "cli-table3";
import pc from "picocolors";
import { safeJson } from "./_terminal_guard.ts";

/** How healthy one checked thing is; only "fail" makes a command exit non-zero. */
export type Status = "ok" | "warn" | "fail" | "info";

/** The colour functions of picocolors. */
export type Colors = ReturnType<typeof pc.createColors>;

interface Stream {
  isTTY?: boolean;
}

/** Whether to colour output written to `stream`: NO_COLOR wins, then FORCE_COLOR, then a terminal. */
export function colorEnabled(
  stream: Stream = process.stdout,
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (env.NO_COLOR) return false;
  if (env.FORCE_COLOR && env.FORCE_COLOR !== "0") return true;
  return Boolean(stream.isTTY) && env.TERM !== "dumb";
}

/** Colour functions for `stream` (no-ops when colour is off). */
export function colors(stream: Stream = process.stdout): Colors {
  return pc.createColors(colorEnabled(stream));
}

const MARKS: Record<Status, [string, keyof Colors]> = {
  ok: ["✓", "green"],
  warn: ["!", "yellow"],
  fail: ["✗", "red"],
  info: ["·", "dim"],
};

/** A one-character status mark, coloured when colour is on. */
export function mark(status: Status, c: Colors = colors()): string {
  const [glyph, color] = MARKS[status];
  return (c[color] as (s: string) => string)(glyph);
}

/** Renders rows as a table with a header; long cells wrap at word boundaries. */
export function table(head: string[], rows: string[][], c: Colors = colors()): string {
  const width = process.stdout.columns && process.stdout.columns > 40 ? process.stdout.columns : 120;
  const t = new Table({
    head: head.map((h) => c.bold(h)),
    style: { head: [], border: [], compact: true },
    wordWrap: true,
    wrapOnWordBoundary: true,
    colWidths: fitColumns(head, rows, width),
  });
  t.push(...rows);
  return t.toString();
}

/** Column widths that fit `total` characters: columns that fit their fair share keep their width. */
export function fitColumns(head: string[], rows: string[][], total: number): (number | null)[] {
  const natural = head.map((h, i) =>
    Math.max(visibleLength(h), ...rows.map((r) => longestLine(r[i] ?? ""))) + 2
  );
  let room = total - (head.length + 1);
  if (natural.reduce((a, b) => a + b, 0) <= room) return natural.map(() => null);
  const widths: (number | undefined)[] = natural.map(() => undefined);
  // Settle the narrow columns first; whatever is left is shared by the wide ones.
  for (let settled = true; settled;) {
    settled = false;
    const open = widths.filter((w) => w === undefined).length;
    const fair = Math.floor(room / Math.max(1, open));
    natural.forEach((w, i) => {
      if (widths[i] === undefined && w <= fair) {
        widths[i] = w;
        room -= w;
        settled = true;
      }
    });
  }
  const open = widths.filter((w) => w === undefined).length;
  return widths.map((w) => w ?? Math.max(10, Math.floor(room / Math.max(1, open))));
}

function longestLine(text: string): number {
  return Math.max(...text.split("\n").map(visibleLength));
}

// deno-lint-ignore no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

/** Length of `text` as shown, ignoring colour codes. */
export function visibleLength(text: string): number {
  return text.replace(ANSI, "").length;
}

/** Writes a value as indented JSON on stdout, for scripts. */
export function printJson(value: unknown): void {
  process.stdout.write(safeJson(value) + "\n");
}

/** Milliseconds as a short human duration ("850 ms", "2.4 s"). */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}
