// The approval questions waiting for a person, shown above every tab: each can be approved or declined
// here. The answer goes to the dashboard as JSON, which passes it to the serve that asked; the question
// leaves the page once that serve publishes it closed (the first answer, here or at the client, counts).
import { useState } from "preact/hooks";
import { ago, html, shortSession } from "./format.js";

/** Seconds left until an ISO time, as "4m 10s left". */
function left(iso, now = Date.now()) {
  const s = Math.max(0, Math.round((Date.parse(iso) - now) / 1000));
  return s >= 60 ? `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s left` : `${s}s left`;
}

/** Questions waiting for a person, on every tab: each can be approved or declined here. */
export function PendingApprovals({ serves }) {
  const pending = serves.flatMap((s) => (s.state.approvals ?? []).map((a) => ({ pid: s.pid, a })));
  const [sent, setSent] = useState({});
  if (!pending.length) return null;
  const answer = async (pid, id, value, scope) => {
    setSent((m) => ({ ...m, [id]: { busy: true } }));
    try {
      const response = await fetch(`/api/serves/${pid}/approvals/${encodeURIComponent(id)}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ answer: value, ...(scope ? { scope } : {}) }),
      });
      const body = await response.json().catch(() => ({}));
      setSent((m) => ({
        ...m,
        [id]: response.ok ? { done: value } : { error: body.error ?? response.statusText },
      }));
    } catch (error) {
      setSent((m) => ({ ...m, [id]: { error: String(error) } }));
    }
  };
  return html`<section class="card approvals-pending">
    <h3>Waiting for your approval</h3>
    ${
    pending.map(({ pid, a }) => {
      const state = sent[a.id] ?? {};
      // A value only the client's form can take (a secret) cannot be given here: such a question is declined or
      // answered in the client.
      const formOnly = (a.fields ?? []).some((f) => f.required);
      const done = state.busy || state.done;
      return html`
        <div class="approval" data-approval=${a.id} data-kind=${a.kind ?? "call"}>
          <p>${heading(a)}
                  <span class="muted"> · serve ${pid} · session ${shortSession(a.session)} · asked ${ago(
                    a.askedAt,
                  )} · ${left(a.expiresAt)}</span></p>
          <pre class="args">${a.kind === "add_server" ? a.text ?? a.summary : a.summary}</pre>
          <p class="muted">${a.reason}. ${a.client
            ? "The MCP client was asked too; the first answer counts."
            : "The MCP client cannot be asked: only this page can answer."}${formOnly
            ? " It needs a value only the MCP client's form can take: answer there, or decline here."
            : ""}</p>
          <p>
                  ${formOnly ? null : (a.scopes ?? [{ value: undefined, title: "Approve" }]).map((s) =>
                    html`
                      <button class="answer approve" data-answer="approve" data-scope=${s.value ??
                        ""} disabled=${done}
                        onClick=${() => answer(pid, a.id, "approve", s.value)}>${a.scopes
                          ? `Approve: ${s.title}`
                          : "Approve"}</button>
                    `
                  )}
                  <button class="answer decline" data-answer="decline" disabled=${done} onClick=${() =>
                    answer(pid, a.id, "decline")}>Decline</button>
                  ${state.done ? html`<span class="muted"> sent (${state.done})…</span>` : null}
                  ${state.error ? html`<span class="bad"> ${state.error}</span>` : null}
                </p>
        </div>
      `;
    })
  }
  </section>`;
}

/** What a question is about, in one line: a tool call, a server to add, or a plan and its calls. */
function heading(a) {
  if (a.kind === "add_server") return html`<span class="mono">Add server ${a.tool} as mcp_${a.server}</span>`;
  if (a.kind === "plan" && a.plan) {
    return html`<span class="mono">plan: “${a.plan.description}”</span> <span class="muted">(${a.plan.calls} calls on ${a.server})</span>`;
  }
  return html`<span class="mono">${a.server} / ${a.tool}</span>`;
}
