// Runs: what each run_python call did, folded from the activity events every serve publishes. Each
// event kind has a reducer in EVENT_KINDS; kinds this page does not know are ignored, so a newer serve
// never breaks an older page, and a new capability adds its kind here and its section in RunDetail.
// Images are <img> elements loading from the dashboard's API (PNG or JPEG only, checked there); text
// displays, SVG and HTML source included, are text, as everything Preact renders.
import { useState } from "preact/hooks";
import { Badge, Block, clock, duration, firstLine, html, prettyJson, shortSession, size } from "./format.js";
import { RegistryEvents } from "./registry.js";

/** Runs kept per serve; older ones drop off the page. */
const MAX_RUNS = 300;
/** Tool calls kept that belong to no run. */
const MAX_LOOSE = 200;

/** A serve's activity as the page holds it. */
export function newActivity() {
  return { runs: new Map(), loose: [], lastSeq: 0 };
}

function runOf(activity, id, at) {
  let run = activity.runs.get(id);
  if (!run) {
    run = { id, firstAt: at, calls: [] };
    activity.runs.set(id, run);
    if (activity.runs.size > MAX_RUNS) activity.runs.delete(activity.runs.keys().next().value);
  }
  return run;
}

/** How each kind of event changes a serve's activity. */
export const EVENT_KINDS = {
  "run.start": (activity, e) => {
    runOf(activity, e.run, e.at).start = e;
  },
  "run.end": (activity, e) => {
    runOf(activity, e.run, e.at).end = e;
  },
  "approval.asked": (activity, e) => {
    if (e.run) approvalOf(runOf(activity, e.run, e.at), e).asked = e;
  },
  "approval.closed": (activity, e) => {
    if (e.run) approvalOf(runOf(activity, e.run, e.at), e).closed = e;
  },
  "registry.find": registryEvent,
  "server.add": registryEvent,
  "server.remove": registryEvent,
  "tool.call": (activity, e) => {
    if (e.run) return void runOf(activity, e.run, e.at).calls.push(e);
    activity.loose.push(e);
    if (activity.loose.length > MAX_LOOSE) activity.loose.shift();
  },
};

/** A registry search, add or removal joins its run's list. */
function registryEvent(activity, e) {
  if (e.run) (runOf(activity, e.run, e.at).registry ??= []).push(e);
}

function approvalOf(run, e) {
  run.approvals ??= new Map();
  let approval = run.approvals.get(e.id);
  if (!approval) run.approvals.set(e.id, approval = { id: e.id });
  return approval;
}

/** Folds events into `activity`, skipping those already seen (a reconnect replays some). */
export function applyEvents(activity, events) {
  for (const event of events) {
    if (typeof event?.seq !== "number" || event.seq <= activity.lastSeq) continue;
    activity.lastSeq = event.seq;
    EVENT_KINDS[event.kind]?.(activity, event);
  }
}

/** Every run of the shown serves, newest first. */
function newestRuns(serves) {
  const rows = [];
  for (const serve of serves) {
    for (const run of serve.activity.runs.values()) rows.push({ pid: serve.pid, run });
  }
  return rows.sort((a, b) => (b.run.firstAt ?? "").localeCompare(a.run.firstAt ?? ""));
}

/** The runs table; a click on a run opens its detail below it. */
export function RunsView({ serves, open, setOpen }) {
  const byPid = new Map(serves.map((s) => [s.pid, s]));
  const rows = newestRuns(serves);
  if (!rows.length) {
    return html`<p class="empty">No runs yet. They appear here as MCP clients call run_python.</p>`;
  }
  const several = serves.length > 1;
  return html`
    <table class="runs">
      <thead>
        <tr>
          <th>time</th><th>status</th><th>duration</th>${several
            ? html`<th>serve</th>`
            : null}<th>session</th>
          <th>tool calls</th><th>code</th>
        </tr>
      </thead>
      <tbody>${rows.map(({ pid, run }) => {
        const key = `${pid}/${run.id}`;
        const failed = run.calls.filter((c) => c.outcome !== "ok").length;
        const row = html`
          <tr class="run ${open === key ? "open" : ""}" data-run=${run.id}
            onClick=${() => setOpen(open === key ? undefined : key)}>
                  <td>${clock(run.start?.at ?? run.firstAt)}</td>
                  <td><${Badge} status=${run.end?.status ?? "running"} /></td>
                  <td>${run.end ? duration(run.end.ms) : "…"}</td>
                  ${several ? html`<td>${pid}</td>` : null}
                  <td class="mono">${shortSession(run.start?.session ?? run.end?.session)}</td>
                  <td>${run.calls.length}${failed
                    ? html`
                      <span class="bad aside">(${failed} failed)</span>
                    `
                    : null}</td>
                  <td class="mono code-line">${firstLine(run.start?.code)}</td>
                </tr>
        `;
        if (open !== key) return row;
        return [
          row,
          html`
            <tr class="detail">
              <td colspan=${several ? 7 : 6}>
                <${RunDetail} run=${run} serve=${byPid.get(pid)} />
              </td>
            </tr>
          `,
        ];
      })}</tbody>
    </table>
  `;
}

/** Everything about one run: code, output, result, displays, artifacts, approvals and its tool calls. */
export function RunDetail({ run, serve }) {
  const end = run.end;
  return html`<div class="run-detail" data-detail=${run.id}>
    <p class="muted">Run <span class="mono">${run.id}</span>${
    run.start ? html`, timeout ${run.start.timeout} s` : null
  }${end?.sessionLost ? html`, <span class="bad">the sandbox was lost</span>` : null}</p>
    <${Block} title="code" text=${run.start?.code} kind="code" />
    <${Block} title="stdout" text=${end?.stdout} />
    <${Block} title="stderr" text=${end?.stderr} kind="stderr" />
    <${Block} title="value" text=${end?.value} />
    <${Block} title="error" text=${end?.error} kind="error" />
    ${end?.notes?.length ? html`<ul class="notes">${end.notes.map((n) => html`<li>${n}</li>`)}</ul>` : null}
    <${Displays} end=${end} pid=${serve?.pid} />
    <${Artifacts} end=${end} serve=${serve} />
    <${Approvals} approvals=${run.approvals} />
    <${RegistryEvents} events=${run.registry} />
    <${ToolCalls} calls=${run.calls} />
  </div>`;
}

/** The tool calls of one run (or those of no run). */
export function ToolCalls({ calls }) {
  if (!calls.length) return html`<p class="muted">No tool calls.</p>`;
  return html`
    <table class="calls">
      <thead>
        <tr>
          <th>server / tool</th>
          <th>arguments</th>
          <th>result</th>
          <th>latency</th>
          <th>outcome</th>
        </tr>
      </thead>
      <tbody>${calls.map((c) =>
        html`
          <tr class="call" data-tool=${`${c.server}/${c.tool}`}>
            <td class="mono">${c.server} / ${c.tool}</td>
            <td>
              <pre class="args">${prettyJson(c.args)}</pre>
            </td>
            <td>${size(c.resultBytes)}</td>
            <td>${duration(c.ms)}</td>
            <td><${Badge} status=${c.outcome} />${c.error
              ? html`<div class="call-error">${c.error}</div>`
              : null}</td>
          </tr>
        `
      )}</tbody>
    </table>
  `;
}

const KIND = {
  "image/png": "PNG",
  "image/jpeg": "JPEG",
  "image/svg+xml": "SVG source",
  "text/html": "HTML source",
  "text/plain": "text",
  "text/markdown": "markdown",
};

/** What the run displayed, in order: images inline, text as text. */
export function Displays({ end, pid }) {
  const displays = end?.displays ?? [];
  if (!displays.length) return null;
  return html`
    <section class="block displays">
      <h4>displays (${displays.length}${end.displaysOmitted
        ? ` + ${end.displaysOmitted} not listed`
        : ""})</h4>
      ${displays.map((d, i) => html`<${DisplayItem} display=${d} pid=${pid} key=${i} />`)}
    </section>
  `;
}

function DisplayItem({ display: d, pid }) {
  const [failed, setFailed] = useState(false);
  const label = `${KIND[d.mimeType] ?? d.mimeType} · ${size(d.size)}`;
  let body;
  if (d.dropped) {
    body =
      html`<p class="muted">dropped from the result: over the run's display cap (CODEMODE_MAX_DISPLAY)</p>`;
  } else if (d.file && !failed) {
    body = html`
      <img class="display-image" src=${`/api/serves/${pid}/displays/${encodeURIComponent(d.file)}`}
        alt=${d.text ?? label} loading="lazy" onError=${() => setFailed(true)} />
    `;
  } else if (d.mimeType.startsWith("image/") && d.mimeType !== "image/svg+xml") {
    body = html`<p class="muted">image not shown: ${
      failed
        ? "no longer kept (the dashboard keeps the images of a serve's most recent runs)"
        : d.notKept ?? "not kept"
    }</p>`;
  } else if (d.text !== undefined) body = html`<pre class="display-text">${d.text}</pre>`;
  else body = html`<p class="muted">text not kept${d.notKept ? `: ${d.notKept}` : ""}</p>`;
  return html`
    <figure class="display"
      data-mime=${d.mimeType}><figcaption class="muted">${label}</figcaption>${body}</figure>
  `;
}

/** The run's artifacts, each with a download link while its session lives. */
export function Artifacts({ end, serve }) {
  const artifacts = end?.artifacts ?? [];
  if (!artifacts.length) return null;
  const live = new Set(serve?.state.artifactSessions ?? []);
  const prefix = "codemode://artifacts/";
  return html`
    <section class="block artifacts">
      <h4>artifacts (${artifacts.length}${end.artifactsOmitted
        ? ` + ${end.artifactsOmitted} not listed`
        : ""})</h4>
      <table class="artifacts">
        <thead>
          <tr>
            <th>name</th>
            <th>type</th>
            <th>size</th>
            <th></th>
          </tr>
        </thead>
        <tbody>${artifacts.map((a) => {
          const tail = a.uri.startsWith(prefix) ? a.uri.slice(prefix.length) : "";
          const alive = tail && live.has(tail.split("/")[0]);
          return html`
            <tr class="artifact" data-artifact=${a.name}>
              <td class="mono">${a.name}</td>
              <td>${a.mimeType}</td>
              <td>${size(a.size)}</td>
              <td>${alive
                ? html`<a class="download" href=${`/api/serves/${serve.pid}/artifacts/${tail}`} download>download</a>`
                : html`<span class="muted gone">gone: its session ended</span>`}</td>
            </tr>
          `;
        })}</tbody>
      </table>
    </section>
  `;
}

/** The approval questions the run's calls asked, and how each ended. */
export function Approvals({ approvals }) {
  if (!approvals?.size) return null;
  return html`
    <section class="block approvals">
      <h4>approvals</h4>
      <ul class="approval-log">${[...approvals.values()].map((a) => {
        const q = a.closed ?? a.asked;
        const outcome = a.closed?.outcome ?? "waiting";
        const via = a.closed?.via ? ` on the ${a.closed.via === "client" ? "client" : a.closed.via}` : "";
        const what = q.about === "add_server"
          ? `add ${q.tool} as mcp_${q.server}`
          : q.about === "plan" && q.plan
          ? `plan: “${q.plan.description}”`
          : `${q.server} / ${q.tool}`;
        return html`<li data-approval=${a.id}>
          <span class="mono">${what}</span> <${Badge} status=${outcome} />${via}${
          a.closed?.scope === "session" ? " (for the session)" : a.closed?.scope === "keep" ? " (kept)" : ""
        }
          <div class="muted">${q.summary}</div>
        </li>`;
      })}</ul>
    </section>
  `;
}
