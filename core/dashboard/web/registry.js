// Servers found and added from an MCP registry: each run's searches and adds (from the activity events),
// and the servers client sessions added, per serve (from the state each serve publishes). Registry text
// is untrusted: it reaches the page only as text, through Preact.
import { Badge, clock, duration, html, shortSession } from "./format.js";

/** The registry events of one run: searches, adds (with their outcome and what runs) and removals. */
export function RegistryEvents({ events }) {
  if (!events?.length) return null;
  return html`
    <section class="block registry">
      <h4>registry</h4>
      <ul class="registry-log">${events.map((e) => html`<li data-registry=${e.kind}>${line(e)}</li>`)}</ul>
    </section>
  `;
}

function line(e) {
  // Words between elements go in as expressions: htm drops whitespace that a line break starts.
  if (e.kind === "registry.find") {
    const found = e.error
      ? html`<span class="bad">${e.error}</span>`
      : `${e.results} found${e.leftOut ? `, ${e.leftOut} left out` : ""}`;
    return html`
      <span class="mono">find_servers(${JSON.stringify(
        e.query,
      )})</span>${` on ${e.registry}: `}${found}${" "}<span
        class="muted">${duration(e.ms)}</span>
    `;
  }
  if (e.kind === "server.remove") {
    return html`<span class="mono">remove_server(${JSON.stringify(e.alias)})</span>${`: ${e.name} stopped`}`;
  }
  const alias = e.alias ? html`${" as "}<span class="mono">mcp_${e.alias}</span>` : null;
  const kept = e.kept ? html`${", kept in "}<span class="mono">${e.kept}</span>` : null;
  const tools = e.tools !== undefined ? `, ${e.tools} tools` : "";
  return html`
    <span class="mono">add_server(${JSON.stringify(e.name)})</span>${" "}<${Badge}
      status=${e.outcome} />${alias}${tools}${kept}${e.runs
        ? html`<div class="mono args">${e.runs}</div>`
        : null}${e.why ? html`<div class="muted">${e.why}</div>` : null}
  `;
}

/** The servers client sessions added from a registry, per serve; nothing when none did. */
export function AddedServers({ serves }) {
  const rows = serves.flatMap((s) => (s.state.added ?? []).map((a) => ({ pid: s.pid, a })));
  if (!rows.length) return null;
  return html`
    <section class="card added-servers">
      <h3>Added from a registry</h3>
      <table>
        <thead>
          <tr>
            <th>server</th>
            <th>entry</th>
            <th>runs</th>
            <th>state</th>
            <th>tools</th>
            <th>session</th>
            <th>added</th>
          </tr>
        </thead>
        <tbody>${rows.map(({ pid, a }) =>
          html`
            <tr class="added" data-added=${a.alias}>
              <td class="mono">mcp_${a.alias}</td>
              <td>${a.name} <span class="muted">${a.version} · ${a.registry}</span>${a.kept
                ? html`<div class="muted">kept in ${a.kept}</div>`
                : null}</td>
              <td class="mono">${a.runs}</td>
              <td>
                <${Badge} status=${a.state} />
              </td>
              <td>${a.tools}</td>
              <td class="mono">${pid} · ${shortSession(a.session)}</td>
              <td>${clock(a.addedAt)}</td>
            </tr>
          `
        )}</tbody>
      </table>
    </section>
  `;
}
