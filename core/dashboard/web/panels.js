// The panels besides runs: each serve's figures, sessions and sandboxes, upstream servers and their
// tools, the effective policy, and search over every configured server's tools and the skills (the
// skills panel and the approvals are in skills.js and approvals.js). A section a serve does not publish
// (an older serve, a capability not there yet) is simply not shown.
import { useEffect, useRef, useState } from "preact/hooks";
import { ago, Badge, clock, duration, html, shortSession } from "./format.js";

/** The sum of a metric's values in a serve's published metrics, optionally only those matching labels. */
function metricSum(metrics, name, labels = {}) {
  const metric = (metrics ?? []).find((m) => m.name === name);
  if (!metric) return 0;
  return metric.values
    .filter((v) => Object.entries(labels).every(([k, want]) => v.labels?.[k] === want))
    .filter((v) => !v.metricName || v.metricName === name || v.metricName.endsWith("_count"))
    .reduce((n, v) => n + v.value, 0);
}

/** Headline figures of the shown serves, summed. */
export function Summary({ serves }) {
  const sum = (name, labels) => serves.reduce((n, s) => n + metricSum(s.state.metrics, name, labels), 0);
  const figures = [
    ["runs", sum("codemode_runs_total")],
    ["ok", sum("codemode_runs_total", { outcome: "ok" })],
    ["errors", sum("codemode_runs_total", { outcome: "error" })],
    ["timeouts", sum("codemode_runs_total", { outcome: "timeout" })],
    ["tool calls", sum("codemode_tool_calls_total")],
    ["sandboxes", sum("codemode_sandboxes")],
    ["jobs running", sum("codemode_jobs")],
    ["servers up", serves.reduce((n, s) => n + s.state.servers.filter((x) => x.state === "ready").length, 0)],
  ];
  return html`<dl class="summary">${
    figures.map(([label, value]) =>
      html`
        <div>
          <dt>${label}</dt>
          <dd data-figure=${label}>${value}</dd>
        </div>
      `
    )
  }</dl>`;
}

/** One heading per serve, saying which client started it and where. */
function ServeHeading({ serve }) {
  const s = serve.state;
  const clients = [...new Set(s.clients.map((c) => c.name))].join(", ");
  return html`<h3>serve ${serve.pid}${
    s.node ? ` · node ${s.node}` : ""
  } <span class="muted">· ${s.transport}${s.url ? ` ${s.url}` : ""}${
    clients ? ` · ${clients}` : ""
  } · ${s.cwd} · up since ${clock(s.startedAt)}</span></h3>`;
}

/** Client sessions and their sandboxes. */
export function SessionsPanel({ serves }) {
  return serves.map((serve) =>
    html`<section class="card">
    <${ServeHeading} serve=${serve} />
    ${
      serve.state.sessions.length
        ? html`
          <table>
            <thead>
              <tr>
                <th>session</th>
                <th>client</th>
                <th>state</th>
                <th>sandbox</th>
                <th>runtime</th>
                <th>isolation</th>
                <th>python</th>
                <th>runs</th>
                <th>last used</th>
              </tr>
            </thead>
            <tbody>${serve.state.sessions.map((x) =>
              html`
                <tr>
                  <td class="mono">${shortSession(x.key, 12)}</td>
                  <td>${serve.state.clients.find((c) => c.session === x.key)?.name ?? "-"}</td>
                  <td>
                    <${Badge} status=${x.state} />
                  </td>
                  <td class="mono">${x.sandbox ?? "-"}</td>
                  <td>${x.runtime ?? "-"}</td>
                  <td>${x.isolation ?? "-"}</td>
                  <td>${x.python ?? "-"}</td>
                  <td>${x.runs}</td>
                  <td>${ago(x.lastUsedAt)}</td>
                </tr>
              `
            )}</tbody>
          </table>
        `
        : html`<p class="empty">No live sandbox session.</p>`
    }
    ${serve.state.sessions.filter((x) => x.jobs?.length).map((x) => html`<${JobsTable} session=${x} />`)}
  </section>`
  );
}

/** A session's background jobs, each with the latest output it printed (kept as text). */
function JobsTable({ session }) {
  return html`
    <h4 class="jobs-heading">background jobs of session <span class="mono">${shortSession(
      session.key,
      12,
    )}</span></h4>
    <table class="jobs" data-session=${session.key}>
      <thead>
        <tr>
          <th>job</th>
          <th>name</th>
          <th>state</th>
          <th>time</th>
          <th>tool calls</th>
          <th>output (latest)</th>
        </tr>
      </thead>
      <tbody>${session.jobs.map((j) =>
        html`
          <tr class="job" data-job=${j.id}>
            <td class="mono">${j.id}${j.kind === "task" ? " (task)" : ""}</td>
            <td>${j.name}</td>
            <td>
              <${Badge} status=${j.state} />${j.overtime ? " past CODEMODE_MAX_JOB_TIME" : ""}
            </td>
            <td>${duration(j.seconds * 1000)}</td>
            <td>${j.toolCalls}</td>
            <td>
              <pre class="job-output">${(j.output ?? "").slice(-2000)}${j.error ? `\n${j.error}` : ""}</pre>
            </td>
          </tr>
        `
      )}</tbody>
    </table>
  `;
}

/** Upstream servers: state, restarts, and their tools on demand. */
export function ServersPanel({ serves }) {
  const [open, setOpen] = useState(undefined);
  return serves.map((serve) =>
    html`<section class="card">
    <${ServeHeading} serve=${serve} />
    ${
      serve.state.servers.length
        ? html`
          <table>
            <thead>
              <tr>
                <th>server</th>
                <th>transport</th>
                <th>state</th>
                <th>restarts</th>
                <th>tools</th>
              </tr>
            </thead>
            <tbody>${serve.state.servers.map((x) => {
              const key = `${serve.pid}/${x.name}`;
              return [
                html`
                  <tr class="server" data-server=${x.name} onClick=${() =>
                    setOpen(open === key ? undefined : key)}>
                    <td>${x.name}</td>
                    <td>${x.transport}</td>
                    <td><${Badge} status=${x.state} />${x.error
                      ? html`<div class="call-error">${x.error}</div>`
                      : null}</td>
                    <td>${x.restarts}</td>
                    <td>${x.toolCount ?? x.tools.length}${x.index
                      ? html`
                        <span class="muted aside">(${x.index})</span>
                      `
                      : null}${x.problems?.some((p) => p.leftOut)
                      ? html`
                        <span class="call-error aside">${x.problems.filter((p) => p.leftOut)
                          .length} left out</span>
                      `
                      : null}</td>
                  </tr>
                `,
                open === key
                  ? html`
                    <tr class="detail">
                      <td colspan="5">
                        <ul class="tools">${x.tools.map((t) =>
                          html`<li><span class="mono">${t.name}</span>${
                            t.addedAt
                              ? html`
                                <span class="badge">new</span>
                              `
                              : null
                          } <span class="muted">${t.description ?? ""}</span></li>`
                        )}${(x.toolCount ?? 0) > x.tools.length
                          ? html`<li class="muted">and ${
                            x.toolCount - x.tools.length
                          } more: codemode tools ${x.name}</li>`
                          : null}</ul>
                        ${x.problems?.length
                          ? html`<ul class="tools problems">${
                            x.problems.map((p) =>
                              html`<li class="call-error"><span class="mono">${p.tool}</span> ${p.problem}${
                                p.leftOut ? " (left out)" : ""
                              }</li>`
                            )
                          }</ul>`
                          : null}
                      </td>
                    </tr>
                  `
                  : null,
              ];
            })}</tbody>
          </table>
        `
        : html`<p class="empty">No MCP server is configured.</p>`
    }
  </section>`
  );
}

/** The effective policy of each serve, and where each rule was set. */
export function PolicyPanel({ serves }) {
  return serves.map((serve) => {
    const p = serve.state.policy;
    return html`
      <section class="card">
        <${ServeHeading} serve=${serve} />
        <p>${p.open
          ? "Open: every configured server and tool is allowed."
          : "Restricted by the rules below."}</p>
        <table class="policy">
          <thead>
            <tr>
              <th>rule</th>
              <th>value</th>
              <th>set by</th>
            </tr>
          </thead>
          <tbody>${Object.entries(p.rules).map(([rule, value]) =>
            html`
              <tr>
                <td class="mono">${rule}</td>
                <td class="mono">${Array.isArray(value)
                  ? value.join(", ") || "(none)"
                  : value === undefined
                  ? "(no limit)"
                  : String(value)}</td>
                <td>${p.sources[rule] ?? "default"}</td>
              </tr>
            `
          )}</tbody>
        </table>
      </section>
    `;
  });
}

/** The same search as `codemode search`, over every configured server's tools. */
export function SearchPanel() {
  const [query, setQuery] = useState("");
  const [result, setResult] = useState({ hits: [] });
  const latest = useRef(0);
  useEffect(() => {
    const q = query.trim();
    if (!q) return void setResult({ hits: [] });
    const mine = ++latest.current;
    const timer = setTimeout(async () => {
      try {
        const response = await fetch(`/api/search?q=${encodeURIComponent(q)}&limit=20`);
        const body = await response.json();
        if (mine === latest.current) setResult(response.ok ? body : { hits: [], error: body.error });
      } catch (error) {
        if (mine === latest.current) setResult({ hits: [], error: String(error) });
      }
    }, 150);
    return () => clearTimeout(timer);
  }, [query]);
  return html`<section class="card">
    <input class="search" type="search" placeholder="Search the tools of every configured server, and the skills"
      value=${query} onInput=${(e) => setQuery(e.currentTarget.value)} autofocus />
    ${result.error ? html`<p class="bad">${result.error}</p>` : null}
    ${
    result.hits.length
      ? html`
        <table class="hits">
          <thead>
            <tr>
              <th>server</th>
              <th>tool</th>
              <th>description</th>
              <th>score</th>
            </tr>
          </thead>
          <tbody>${result.hits.map((h) =>
            html`
              <tr data-kind=${h.kind ?? "tool"}>
                <td>${h.server}${h.kind === "skill"
                  ? html`
                    <span class="badge skill aside">skill</span>
                  `
                  : null}</td>
                <td class="mono">${h.tool}</td>
                <td>${h.description}</td>
                <td>${h.score.toFixed(2)}</td>
              </tr>
            `
          )}</tbody>
        </table>
      `
      : query.trim()
      ? html`<p class="empty">No tool matches.</p>`
      : null
  }
  </section>`;
}
