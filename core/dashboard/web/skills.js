// The skills panel: the skills of every skill directory, read by the dashboard as `codemode skills list`
// reads them, refreshed every few seconds while the tab is open.
import { useEffect, useState } from "preact/hooks";
import { html } from "./format.js";

/** The skills of every skill directory, as `codemode skills list` shows them; a click shows the SKILL.md. */
export function SkillsPanel() {
  const [data, setData] = useState(undefined);
  const [open, setOpen] = useState(undefined);
  useEffect(() => {
    let live = true;
    const load = async () => {
      try {
        const response = await fetch("/api/skills");
        const body = await response.json();
        if (live) setData(response.ok ? body : { error: body.error });
      } catch (error) {
        if (live) setData({ error: String(error) });
      }
    };
    void load();
    const timer = setInterval(load, 5000);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, []);
  if (!data) return html`<p class="empty">Reading the skills…</p>`;
  if (data.error) return html`<p class="bad">${data.error}</p>`;
  if (data.mode === "off") return html`<p class="empty">Skills are turned off (CODEMODE_SKILLS=off).</p>`;
  return html`<section class="card">
    <h3>Skills <span class="muted">· ${data.mode === "ro" ? "read-only" : "saved and loaded"} · from ${
    data.directories.map((d) => `${d.path} (${d.kind})`).join(", ")
  }</span></h3>
    ${
    data.skills.length
      ? html`
        <table class="skills">
          <thead>
            <tr>
              <th>skill</th>
              <th>import</th>
              <th>kind</th>
              <th>functions</th>
              <th>description</th>
              <th>from</th>
            </tr>
          </thead>
          <tbody>${data.skills.map((k) => [
            html`
              <tr class="skill" data-skill=${k.name} onClick=${() =>
                setOpen(open === k.name ? undefined : k.name)}>
                <td class="mono">${k.name}${k.version
                  ? html`
                    <span class="muted aside">v${k.version}</span>
                  `
                  : null}</td>
                <td class="mono">skills.${k.module}</td>
                <td>${k.kind}</td>
                <td class="mono">${k.functions.join(", ") || "-"}</td>
                <td>${k.description}${k.servers?.length
                  ? html`<div class="muted">uses ${k.servers.join(", ")}</div>`
                  : null}</td>
                <td title=${k.directory}>${k.source}</td>
              </tr>
            `,
            open === k.name
              ? html`
                <tr class="detail">
                  <td colspan="6">
                    <pre class="manifest">${k.manifest}</pre>
                  </td>
                </tr>
              `
              : null,
          ])}</tbody>
        </table>
      `
      : html`<p class="empty">No skills yet. Sandbox code saves them with runtime.save_skill().</p>`
  }
    ${
    data.diagnostics.length
      ? html`<ul class="notes">${
        data.diagnostics.map((d) => html`<li><span class="mono">${d.path}</span>: ${d.message}</li>`)
      }</ul>`
      : null
  }
  </section>`;
}
