/**
 * Plans (`async with runtime.plan("..."):`, sandbox/mcp/_plan.py): the host side. A plan belongs to one run
 * and lives only as long as it. Its rehearsal records every call that is not read-only (as a dry run does);
 * then one question puts the whole list to the user (server, tool, summarised and redacted arguments, how
 * many times); once approved, exactly those calls, matched as a multiset of server, tool and arguments,
 * go out without further questions, and any other call that is not read-only is refused or asked about on
 * its own. Only the host changes a plan's state, and only on the user's answer: the sandbox can begin,
 * rehearse and end a plan, never approve one, and a plan id means nothing outside its run.
 * @module
 */
import { randomUUID } from "node:crypto";
import {
  type ApprovalRequest,
  type PlanSummary,
  planText,
  redactedText,
  summarizeArguments,
} from "./approvals.ts";
import { PLAN_LIMITS, type PlannedCall } from "./dry_run.ts";
import { RpcError } from "./rpc_error.ts";

/** Most plans one run may open, most open at once, and most characters of a description. */
export const PLAN_CAPS = { perRun: 100, open: 16, description: 300, lines: 100 } as const;

type State = "rehearsing" | "asking" | "approved" | "declined";

/** One plan of a run. */
export class Plan {
  state: State = "rehearsing";
  readonly calls: PlannedCall[] = [];
  #chars = 0;
  overflow = 0;
  /** Approved calls not yet made: canonical key -> how many times. */
  #left = new Map<string, number>();

  constructor(readonly description: string) {}

  record(call: PlannedCall): void {
    const chars = canonicalJson(call.arguments)?.length ?? Infinity;
    if (this.calls.length >= PLAN_LIMITS.calls || this.#chars + chars > PLAN_LIMITS.argumentChars) {
      this.overflow++;
      return;
    }
    this.#chars += chars;
    this.calls.push(call);
  }

  approve(): void {
    this.state = "approved";
    for (const call of this.calls) {
      const key = callKey(call);
      if (key) this.#left.set(key, (this.#left.get(key) ?? 0) + 1);
    }
  }

  /** Takes one approved call matching `call`; false when none is left. */
  take(call: PlannedCall): boolean {
    const key = callKey(call);
    const left = key ? this.#left.get(key) ?? 0 : 0;
    if (!left) return false;
    this.#left.set(key!, left - 1);
    return true;
  }
}

/** The plans of one run. */
export class RunPlans {
  #plans = new Map<string, Plan>();
  #opened = 0;

  /** Opens a plan; its id is what the sandbox marks calls with. */
  begin(description: string): string {
    if (++this.#opened > PLAN_CAPS.perRun) {
      throw new RpcError("PermissionError", `A run may open at most ${PLAN_CAPS.perRun} plans`);
    }
    if (this.#plans.size >= PLAN_CAPS.open) {
      throw new RpcError("PermissionError", `At most ${PLAN_CAPS.open} plans may be open at once`);
    }
    const id = randomUUID();
    this.#plans.set(id, new Plan(description.slice(0, PLAN_CAPS.description)));
    return id;
  }

  /** The plan `id` of this run; PermissionError for an id this run did not open (or already ended). */
  get(id: unknown): Plan {
    const plan = typeof id === "string" ? this.#plans.get(id) : undefined;
    if (!plan) {
      throw new RpcError("PermissionError", "No such plan in this run: a plan lives only inside its block");
    }
    return plan;
  }

  end(id: unknown): void {
    if (typeof id === "string") this.#plans.delete(id);
  }
}

/** The question for a plan: its description and every recorded call, grouped, redacted and counted. */
export function planRequest(plan: { description: string; calls: PlannedCall[] }, secrets: readonly string[]) {
  const groups = new Map<string, { call: PlannedCall; count: number }>();
  for (const call of plan.calls) {
    const key = callKey(call) ?? `${call.server}/${call.tool}/${groups.size}`;
    const group = groups.get(key);
    if (group) group.count++;
    else groups.set(key, { call, count: 1 });
  }
  const lines = [...groups.values()].slice(0, PLAN_CAPS.lines).map(({ call, count }) =>
    `- ${call.server}/${call.tool}${count > 1 ? ` ×${count}` : ""}: ${
      summarizeArguments(call.arguments, secrets)
    }`
  );
  if (groups.size > PLAN_CAPS.lines) {
    lines.push(`- … and ${groups.size - PLAN_CAPS.lines} more different calls`);
  }
  const servers = [...new Set(plan.calls.map((c) => c.server))];
  const summary: PlanSummary = {
    description: redactedText(plan.description, secrets, PLAN_CAPS.description),
    calls: plan.calls.length,
  };
  const calls = lines.join("\n") || "(no call that could change anything)";
  const request: ApprovalRequest = {
    kind: "plan",
    server: servers.join(", ") || "(none)",
    tool: "plan",
    summary: calls,
    reason: "runtime.plan asks before a plan's calls run",
    text: planText(summary, calls),
    subject: "The plan",
    // One answer for the whole plan: approving it never approves a tool for the session.
    scopes: [],
    plan: summary,
  };
  return request;
}

/** A call as the multiset knows it: server, tool and arguments in a canonical JSON form. */
function callKey(call: PlannedCall): string | undefined {
  const args = canonicalJson(call.arguments);
  return args === undefined ? undefined : JSON.stringify([call.server, call.tool, args]);
}

/** JSON with object keys sorted, so equal arguments give equal text; undefined if it cannot be written. */
export function canonicalJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(
      value,
      (_key, v) =>
        v && typeof v === "object" && !Array.isArray(v)
          ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
          : v,
    );
  } catch {
    return undefined;
  }
}
