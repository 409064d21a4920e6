/**
 * The dashboard's page and its files, compiled into codemode: the app (core/dashboard/web/) and the
 * libraries it is built with, Preact and htm, taken from node_modules as text, so the page works offline
 * and a compiled binary carries it (text imports, like the sandbox's Python). No build step: the browser
 * loads them as ES modules through an import map.
 * @module
 */
import { createHash } from "node:crypto";
import indexHtml from "./web/index.html" with { type: "text" };
import appJs from "./web/app.js" with { type: "text" };
import runsJs from "./web/runs.js" with { type: "text" };
import panelsJs from "./web/panels.js" with { type: "text" };
import approvalsJs from "./web/approvals.js" with { type: "text" };
import skillsJs from "./web/skills.js" with { type: "text" };
import registryJs from "./web/registry.js" with { type: "text" };
import formatJs from "./web/format.js" with { type: "text" };
import styleCss from "./web/style.css" with { type: "text" };
import iconSvg from "./web/icon.svg" with { type: "text" };
import preactJs from "../../node_modules/preact/dist/preact.mjs" with { type: "text" };
import hooksJs from "../../node_modules/preact/hooks/dist/hooks.mjs" with { type: "text" };
import htmJs from "../../node_modules/htm/dist/htm.mjs" with { type: "text" };
import preactLicense from "../../node_modules/preact/LICENSE" with { type: "text" };
import htmLicense from "../../node_modules/htm/LICENSE" with { type: "text" };

/** One file the dashboard serves. */
export interface Asset {
  body: Uint8Array;
  type: string;
  /** A strong validator, so a reload costs a 304. */
  etag: string;
}

const JS = "text/javascript; charset=utf-8";

/** Files under `/assets/`, by name. */
const FILES: Record<string, [string, string]> = {
  "app.js": [appJs, JS],
  "runs.js": [runsJs, JS],
  "panels.js": [panelsJs, JS],
  "approvals.js": [approvalsJs, JS],
  "skills.js": [skillsJs, JS],
  "registry.js": [registryJs, JS],
  "format.js": [formatJs, JS],
  "style.css": [styleCss, "text/css; charset=utf-8"],
  "icon.svg": [iconSvg, "image/svg+xml"],
  "preact.mjs": [preactJs, JS],
  "hooks.mjs": [hooksJs, JS],
  "htm.mjs": [htmJs, JS],
  "licenses.txt": [
    `The dashboard is built with Preact and htm.\n\n== Preact ==\n${preactLicense}\n== htm ==\n${htmLicense}`,
    "text/plain; charset=utf-8",
  ],
};

/** The page and its assets. */
export interface DashboardAssets {
  index: Asset;
  files: ReadonlyMap<string, Asset>;
  /** The Content-Security-Policy the page runs under: its own files only, and the import map's hash. */
  csp: string;
}

let cached: DashboardAssets | undefined;

/** The assets, prepared once. */
export function dashboardAssets(): DashboardAssets {
  if (cached) return cached;
  const files = new Map(Object.entries(FILES).map(([name, [text, type]]) => [name, asset(text, type)]));
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(indexHtml)?.[1];
  if (importMap === undefined) throw new Error("The dashboard page has no import map");
  const hash = createHash("sha256").update(importMap).digest("base64");
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  cached = { index: asset(indexHtml, "text/html; charset=utf-8"), files, csp };
  return cached;
}

function asset(text: string, type: string): Asset {
  const body = new TextEncoder().encode(text);
  const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
  return { body, type, etag };
}
