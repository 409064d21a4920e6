/**
 * Approvals: calls the policy says the user must approve are put to a person as questions, one at a time
 * per session and in the order they came, each with a timeout. The broker keeps the open questions, so
 * anything on the host (the MCP client's elicitation, a web page) can list them and answer one by id;
 * the first answer wins and the other asker is told to stop. `scope: "session"` approves a tool for the
 * rest of its session. A client that cannot be asked gets the fallback, unless it is "deny" and a person
 * can answer elsewhere (a dashboard page shows this process): then the question waits for that answer.
 * Sandbox code never reaches the broker: it only sees the answer to its call.
 *
 * A tool call is the default kind of question; other requests (adding a server, a plan of calls) bring
 * their own text, the scopes a person may choose and the values they fill in (`kind`, `text`, `scopes`,
 * `fields`), and get the chosen scope and those values in the answer. Only tool calls are remembered for
 * the session.
 * @module
 */
import { randomUUID } from "node:crypto";
import { log } from "../observe/log.ts";
import { stats } from "../observe/stats.ts";
import { isCall, type PlanSummary, type QuestionParts, questionText, subjectOf } from "./approval_text.ts";

export { planText, questionText, redactedText, summarizeArguments, SUMMARY_LIMITS } from "./approval_text.ts";
export type { PlanSummary } from "./approval_text.ts";

/** A request waiting for the user's approval (a tool call unless `kind` says otherwise). */
export interface ApprovalRequest extends QuestionParts {
  /**
   * The scopes a person may choose, the first being the default (a call: once, or the session); none
   * (an empty list) when the answer is for this request only.
   */
  scopes?: readonly ApprovalScope[];
  /** Values the person fills in (e.g. a server's secret); they reach the requester, never sandbox code. */
  fields?: readonly ApprovalField[];
  /** "deny": when nobody can be asked, refuse whatever CODEMODE_CONFIRM_FALLBACK says. */
  fallback?: "deny";
  /** A plan's question (kind "plan"): its description and how many calls `summary` lists. */
  plan?: PlanSummary;
}

/** One scope a person may choose. */
export interface ApprovalScope {
  value: string;
  title: string;
}

/** A value the person fills in when they approve. */
export interface ApprovalField {
  name: string;
  title: string;
  description?: string;
  /** The requester refuses an approval that leaves it empty. */
  required: boolean;
  default?: string;
  choices?: string[];
}

/** A person's answer, from an MCP client's form or from the dashboard. */
export interface ApprovalDecision {
  approve: boolean;
  /**
   * One of the request's scopes; for a call "session" approves the tool for the rest of the session and
   * "once" (the default) this call only.
   */
  scope?: string;
  /** The fields the person filled in. */
  values?: Record<string, string>;
}

/** How a call's approval ended. */
export type ApprovalOutcome =
  | "approved"
  /** Approved earlier in the session with scope "session"; nobody was asked. */
  | "remembered"
  | "declined"
  /** The person dismissed the question, or the run ended while it was open. */
  | "cancelled"
  | "timeout"
  /** Nobody could be asked: the client has no elicitation; CODEMODE_CONFIRM_FALLBACK decided. */
  | "unavailable";

/** What the waiting call learns. */
export interface ApprovalAnswer {
  approved: boolean;
  outcome: ApprovalOutcome;
  /** Refused: the PermissionError message. Allowed without asking: the note the result carries. */
  message?: string;
  /** Approved by a person: the scope they chose. */
  scope?: string;
  /** Approved by a person: the fields they filled in. */
  values?: Record<string, string>;
}

/** Approves or refuses one call of a run; `signal` aborts when the run ends. */
export type Approver = (request: ApprovalRequest, signal: AbortSignal) => Promise<ApprovalAnswer>;

/** Puts a question to the person at a client; "cancelled" when they dismissed it without an answer. */
export type Ask = (question: PendingApproval, signal: AbortSignal) => Promise<ApprovalDecision | "cancelled">;

/** An open question, as `pending()` lists it. */
export interface PendingApproval extends ApprovalRequest {
  id: string;
  /** The session whose code made the call (an MCP session id, "stdio", "run"). */
  session: string;
  requestId?: string;
  /** The text the person reads. */
  message: string;
  /** When it was put to the person (ISO 8601). */
  askedAt: string;
  /** When it counts as declined (ISO 8601). */
  expiresAt: string;
  /** Whether the session's MCP client was asked; false when only an answer from elsewhere can settle it. */
  client: boolean;
}

/** What subscribers hear: a question was put to the person, or it ended. */
export type ApprovalEvent =
  | { type: "opened"; approval: PendingApproval }
  | {
    type: "closed";
    approval: PendingApproval;
    outcome: ApprovalOutcome;
    scope?: string;
    /** Who answered: "client", or what `answer()` was told (e.g. "dashboard"); absent when nobody did. */
    via?: string;
  };

/** How questions are asked. */
export interface ApprovalOptions {
  /** Seconds a question waits for an answer before the call counts as declined. */
  timeoutSeconds: number;
  /** When nobody can be asked: refuse the call, or let it run and note that in the result. */
  fallback: "deny" | "allow";
  /**
   * Whether a person can answer from elsewhere right now (a dashboard page shows this process). With the
   * "deny" fallback, a question the client cannot be asked then waits for that answer.
   */
  watched?: () => boolean | Promise<boolean>;
}

interface SessionState {
  /** Where the next question lines up. */
  tail: Promise<void>;
  /** `server/tool` keys approved for the rest of the session. */
  approved: Set<string>;
}

interface Open {
  approval: PendingApproval;
  settle(outcome: ApprovalOutcome, decision?: ApprovalDecision, via?: string): void;
}

/** Asks nobody: waits until the question is answered from elsewhere, times out or is withdrawn. */
const answerFromElsewhere: Ask = (_question, signal) =>
  new Promise((resolve) => signal.addEventListener("abort", () => resolve("cancelled"), { once: true }));

/** The questions of one codemode process. */
export class ApprovalBroker {
  readonly options: ApprovalOptions;
  #sessions = new Map<string, SessionState>();
  #open = new Map<string, Open>();
  #listeners = new Set<(event: ApprovalEvent) => void>();

  /** A broker asking with these options. */
  constructor(options: ApprovalOptions) {
    this.options = options;
  }

  /**
   * The approver of one run of `session`: asks through `ask` (that session's client), or, without one,
   * lets the fallback decide. After a question of the run goes unanswered, the run's later questions are
   * declined without asking: nobody is there, and each would hold the run for another timeout.
   */
  approver(session: string, requestId?: string, ask?: Ask): Approver {
    let unanswered = false;
    return async (request, signal) => {
      const state = this.#state(session);
      // Only tool calls are remembered for the session; other requests are asked every time.
      const key = isCall(request) ? `${request.server}/${request.tool}` : undefined;
      if (key && state.approved.has(key)) return { approved: true, outcome: "remembered" };
      let asker = ask;
      const denies = this.options.fallback === "deny" || request.fallback === "deny";
      // A page answers approve or decline only: a question with values to fill in needs the client's form.
      const pageCanAnswer = !request.fields?.some((f) => f.required);
      if (!asker && denies && pageCanAnswer && await this.#watched()) asker = answerFromElsewhere;
      if (!asker) return this.#unavailable(request, session, requestId);
      const turn = state.tail.then(async () => {
        if (key && state.approved.has(key)) {
          return { approved: true, outcome: "remembered" } as ApprovalAnswer;
        }
        if (signal.aborted) return refusal(request, "cancelled", "the run ended before the user was asked");
        if (unanswered) {
          return refusal(
            request,
            "timeout",
            "an earlier question of this run got no answer, so it was not asked",
          );
        }
        const answer = await this.#ask(session, requestId, request, asker, signal, asker === ask);
        if (answer.outcome === "timeout") unanswered = true;
        return answer;
      });
      state.tail = turn.then(() => {}, () => {});
      return await turn;
    };
  }

  /** The questions open right now (at most one per session), oldest first. */
  pending(): PendingApproval[] {
    return [...this.#open.values()].map((o) => ({ ...o.approval }));
  }

  /**
   * Answers an open question (`via` says from where, e.g. "dashboard"); false when no question with this
   * id is open (answered, timed out, unknown).
   */
  answer(id: string, decision: ApprovalDecision, via?: string): boolean {
    const open = this.#open.get(id);
    if (!open) return false;
    // Only a scope the question offered counts; any other falls back to its default.
    const offered = open.approval.scopes?.map((s) => s.value) ?? ["once", "session"];
    if (decision.scope !== undefined && !offered.includes(decision.scope)) {
      decision = { ...decision, scope: undefined };
    }
    open.settle(decision.approve ? "approved" : "declined", decision, via);
    return true;
  }

  /** Calls `listener` whenever a question opens or closes; returns the function that stops it. */
  subscribe(listener: (event: ApprovalEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Forgets a session that ended: its "for the session" approvals go with it. */
  forget(session: string): void {
    this.#sessions.delete(session);
  }

  #state(session: string): SessionState {
    let state = this.#sessions.get(session);
    if (!state) this.#sessions.set(session, state = { tail: Promise.resolve(), approved: new Set() });
    return state;
  }

  #ask(
    session: string,
    requestId: string | undefined,
    request: ApprovalRequest,
    ask: Ask,
    signal: AbortSignal,
    client: boolean,
  ): Promise<ApprovalAnswer> {
    const ms = this.options.timeoutSeconds * 1000;
    const now = Date.now();
    const approval: PendingApproval = {
      ...request,
      id: randomUUID(),
      session,
      ...(requestId ? { requestId } : {}),
      message: questionText(request, this.options.timeoutSeconds),
      askedAt: new Date(now).toISOString(),
      expiresAt: new Date(now + ms).toISOString(),
      client,
    };
    const fields = { approval: approval.id, server: request.server, tool: request.tool, requestId };
    const asked = performance.now();
    const stop = new AbortController();
    return new Promise<ApprovalAnswer>((resolve) => {
      const timer = setTimeout(() => settle("timeout"), ms);
      const onAbort = () =>
        settle("cancelled", undefined, undefined, "the run ended before the user answered");
      const settle = (
        outcome: ApprovalOutcome,
        decision?: ApprovalDecision,
        via?: string,
        why = this.#why(outcome),
      ) => {
        if (!this.#open.delete(approval.id)) return;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        stop.abort();
        const scope = outcome === "approved"
          ? decision?.scope ?? request.scopes?.[0]?.value ?? "once"
          : undefined;
        if (scope === "session" && isCall(request)) {
          this.#state(session).approved.add(`${request.server}/${request.tool}`);
        }
        stats.approval(outcome === "approved" ? "approved" : outcome === "timeout" ? "timeout" : "declined");
        log.info("approval answered", {
          ...fields,
          outcome,
          scope,
          via,
          ms: Math.round(performance.now() - asked),
        });
        this.#emit({
          type: "closed",
          approval,
          outcome,
          ...(scope ? { scope } : {}),
          ...(via ? { via } : {}),
        });
        resolve(
          outcome === "approved"
            ? {
              approved: true,
              outcome,
              // A request that offers its own scopes learns which one was chosen, and the values given.
              ...(request.scopes ? { scope } : {}),
              ...(decision?.values ? { values: decision.values } : {}),
            }
            : refusal(request, outcome, why),
        );
      };
      this.#open.set(approval.id, { approval, settle });
      stats.approval("asked");
      log.info("approval asked", { ...fields, session, reason: request.reason });
      this.#emit({ type: "opened", approval });
      signal.addEventListener("abort", onAbort, { once: true });
      ask(approval, stop.signal).then(
        (decision) =>
          decision === "cancelled"
            ? settle("cancelled", undefined, client ? "client" : undefined)
            : settle(decision.approve ? "approved" : "declined", decision, "client"),
        (error) => {
          // A client that fails to show the question (or went away) gave no approval.
          if (!stop.signal.aborted) log.warn("approval question failed", { ...fields, error: String(error) });
          settle(
            "cancelled",
            undefined,
            undefined,
            `the client could not show the question (${String(error).slice(0, 200)})`,
          );
        },
      );
      if (signal.aborted) onAbort();
    });
  }

  async #watched(): Promise<boolean> {
    try {
      return Boolean(await this.options.watched?.());
    } catch {
      return false;
    }
  }

  #why(outcome: ApprovalOutcome): string | undefined {
    if (outcome === "timeout") {
      return `no answer within ${this.options.timeoutSeconds}s (CODEMODE_CONFIRM_TIMEOUT), which counts as declined`;
    }
    if (outcome === "cancelled") return "the question was dismissed without an answer";
    return undefined;
  }

  #unavailable(request: ApprovalRequest, session: string, requestId?: string): ApprovalAnswer {
    const allow = this.options.fallback === "allow" && request.fallback !== "deny";
    stats.approval("unavailable");
    log.info("approval not asked: the client cannot be asked", {
      server: request.server,
      tool: request.tool,
      session,
      requestId,
      fallback: this.options.fallback,
    });
    const id = isCall(request) ? `"${request.server}/${request.tool}"` : subjectOf(request);
    if (allow) {
      return {
        approved: true,
        outcome: "unavailable",
        message:
          `${id} ran without approval: it needs one (${request.reason}), this client cannot be asked ` +
          "(it does not support MCP elicitation), and CODEMODE_CONFIRM_FALLBACK=allow",
      };
    }
    const elsewhere = this.options.watched && !request.fields?.some((f) => f.required)
      ? "keep the dashboard (codemode ui) open to answer there, "
      : "";
    return {
      approved: false,
      outcome: "unavailable",
      message:
        `${subjectOf(request)} needs the user's approval (${request.reason}), and this client cannot ` +
        `ask: it does not support MCP elicitation. Use a client that does, ${elsewhere}` +
        (request.fallback === "deny" ? "or ask the user to do it" : "or set CODEMODE_CONFIRM_FALLBACK=allow"),
    };
  }

  #emit(event: ApprovalEvent): void {
    for (const listener of this.#listeners) {
      // A listener that throws must not break the question or the other listeners.
      try {
        listener(event);
      } catch (error) {
        log.warn("approval listener failed", { error: String(error) });
      }
    }
  }
}

function refusal(request: ApprovalRequest, outcome: ApprovalOutcome, why?: string): ApprovalAnswer {
  const message = `${subjectOf(request)} declined by the user${why ? `: ${why}` : ""}`;
  return { approved: false, outcome, message };
}
