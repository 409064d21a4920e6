// Small formatting helpers shared by the dashboard's views. They return plain strings; Preact escapes
// every string it renders, so nothing here builds markup.
import htm from "htm";
import { h } from "preact";

/** The tagged template every view writes its markup with (htm over Preact's h). */
export const html = htm.bind(h);

/** "12.3 ms", "1.25 s", "2m 05s". */
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "-";
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
}

/** A session id shortened for a table: a fleet node's prefix (`node-1.`) is left out, it names the serve. */
export function shortSession(id, length = 8) {
  const key = id ?? "";
  return key.slice(key.indexOf(".") + 1).slice(0, length);
}

/** "512 B", "12.0 KiB", "3.4 MiB". */
export function size(n) {
  if (n === undefined || n === null) return "-";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** The local time of an ISO date, "14:03:07". */
export function clock(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "-" : d.toLocaleTimeString([], { hour12: false });
}

/** "3 s ago", "5 min ago". */
export function ago(iso, now = Date.now()) {
  const ms = now - Date.parse(iso);
  if (!Number.isFinite(ms)) return "-";
  if (ms < 60_000) return `${Math.max(0, Math.round(ms / 1000))} s ago`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min ago`;
  return `${Math.round(ms / 3_600_000)} h ago`;
}

/** The first line of a text, cut to `max` characters. */
export function firstLine(text, max = 90) {
  const line = (text ?? "").split("\n").find((l) => l.trim()) ?? "";
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

/** JSON text pretty-printed when it parses, else as it is. */
export function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text ?? "";
  }
}

/** A status word as a coloured badge. */
export function Badge({ status }) {
  return html`<span class="badge ${status}">${status}</span>`;
}

/** A block of text (code, output) kept as text; empty blocks are left out. */
export function Block({ title, text, kind = "" }) {
  if (text === undefined || text === null || text === "") return null;
  return html`
    <section class="block ${kind}">
      <h4>${title}</h4>
      <pre>${text}</pre>
    </section>
  `;
}
