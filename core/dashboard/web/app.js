// The dashboard page: one live connection (server-sent events) to codemode ui or serve --http, the
// serves it reports folded into one store, and tabs over it. Every value reaches the page through Preact,
// which escapes it; nothing here sets HTML from a string.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { html } from "./format.js";
import { applyEvents, newActivity, RunsView, ToolCalls } from "./runs.js";
import { PolicyPanel, SearchPanel, ServersPanel, SessionsPanel, Summary } from "./panels.js";
import { PendingApprovals } from "./approvals.js";
import { SkillsPanel } from "./skills.js";
import { AddedServers } from "./registry.js";

/** Serves by pid: { pid, state, activity }. */
const serves = new Map();
const info = { version: "", mode: "", notice: "" };
let redraw = () => {};
let pending = false;

/** Asks for one re-render on the next frame, however many messages arrived before it. */
function changed() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    redraw();
  });
}

function upsert(pid, state) {
  const known = serves.get(pid);
  // Same pid, new process (a restart): its events count from 1 again.
  if (!known || known.state.startedAt !== state.startedAt) {
    serves.set(pid, { pid, state, activity: newActivity() });
  } else known.state = state;
}

function connect(setLink) {
  const source = new EventSource("/api/events");
  source.addEventListener("snapshot", (message) => {
    const data = JSON.parse(message.data);
    Object.assign(info, { version: data.version, mode: data.mode, notice: data.notice ?? "" });
    const seen = new Set();
    for (const s of data.serves) {
      seen.add(s.pid);
      upsert(s.pid, s.state);
      applyEvents(serves.get(s.pid).activity, s.events);
    }
    for (const pid of [...serves.keys()]) if (!seen.has(pid)) serves.delete(pid);
    changed();
  });
  source.addEventListener("serve", (message) => {
    const { pid, state } = JSON.parse(message.data);
    upsert(pid, state);
    changed();
  });
  source.addEventListener("events", (message) => {
    const { pid, events } = JSON.parse(message.data);
    const serve = serves.get(pid);
    if (serve) applyEvents(serve.activity, events);
    changed();
  });
  source.addEventListener("gone", (message) => {
    serves.delete(JSON.parse(message.data).pid);
    changed();
  });
  source.onopen = () => setLink("live");
  source.onerror = () => setLink(source.readyState === EventSource.CLOSED ? "signed out" : "reconnecting");
  return () => source.close();
}

const TABS = ["runs", "sessions", "servers", "skills", "search", "policy"];

function App() {
  const [, setTick] = useState(0);
  const [link, setLink] = useState("connecting");
  const [tab, setTab] = useState(() =>
    TABS.includes(location.hash.slice(1)) ? location.hash.slice(1) : "runs"
  );
  const [only, setOnly] = useState("all");
  const [open, setOpen] = useState(undefined);
  useEffect(() => {
    redraw = () => setTick((n) => n + 1);
    return connect(setLink);
  }, []);
  useEffect(() => void history.replaceState(null, "", `#${tab}`), [tab]);
  const all = [...serves.values()].sort((a, b) => a.pid - b.pid);
  const shown = only === "all" ? all : all.filter((s) => String(s.pid) === only);
  const loose = shown.flatMap((s) => s.activity.loose);
  return html`
    <header class="top">
      <h1>codemode</h1>
      <span class="muted">${info.version}${info.mode === "ui" ? " · every serve on this machine" : ""}</span>
      <span class="link ${link.replace(" ", "-")}" data-link=${link}>${link}</span>
    </header>
    ${link === "signed out"
      ? html`<p class="bad banner">Not signed in: open the login URL that codemode ui printed (a new one each start).</p>`
      : null}
    <nav class="bar">
      ${TABS.map((t) =>
        html`<button class=${t === tab ? "tab on" : "tab"} data-tab=${t} onClick=${() =>
          setTab(t)}>${t}</button>`
      )}
      <label class="serve-pick">serve
        <select value=${only} onChange=${(e) => setOnly(e.currentTarget.value)}>
          <option value="all">all (${all.length})</option>
          ${all.map((s) => html`<option value=${String(s.pid)}>${s.pid} · ${s.state.transport}</option>`)}
        </select>
      </label>
    </nav>
    <main>
      ${info.notice ? html`<p class="notice">${info.notice}</p>` : null}
      ${!all.length && link === "live" && !info.notice
        ? html`
          <p
            class="empty">No codemode serve is running. Start one (codemode serve, or let your MCP client start it); it appears here at once.</p>
        `
        : null}
      <${PendingApprovals} serves=${shown} />
      <${Summary} serves=${shown} />
      ${tab === "runs" ? html`<${RunsView} serves=${shown} open=${open} setOpen=${setOpen} />` : null}
      ${tab === "runs" && loose.length
        ? html`
          <section class="card">
            <h3>Tool calls outside runs</h3>
            <${ToolCalls} calls=${loose} />
          </section>
        `
        : null}
      ${tab === "sessions" ? html`<${SessionsPanel} serves=${shown} />` : null}
      ${tab === "servers"
        ? html`
          <${AddedServers} serves=${shown} />
          <${ServersPanel} serves=${shown} />
        `
        : null}
      ${tab === "skills" ? html`<${SkillsPanel} />` : null}
      ${tab === "search" ? html`<${SearchPanel} />` : null}
      ${tab === "policy" ? html`<${PolicyPanel} serves=${shown} />` : null}
    </main>
    <footer class="muted">Built with <a href="/assets/licenses.txt">Preact and htm</a>.</footer>
  `;
}

document.getElementById("app").textContent = "";
render(html`<${App} />`, document.getElementById("app"));
