/**
 * The plan RPC methods sandbox/mcp/_plan.py calls: `plan_begin` opens a plan of the run, `plan_approve`
 * puts what its rehearsal recorded to the user in one question (through the run's approver, with the
 * run's clock stopped), `plan_end` closes it. Calls marked with a plan are served in api.ts.
 * @module
 */
import { PLAN_LIMITS } from "./dry_run.ts";
import { planRequest } from "./plans.ts";
import { type RpcContext, RpcError } from "./rpc.ts";
import type { RpcMethod } from "./skills_api.ts";

/** What the plan methods need: the secrets to redact from the question (the session's servers'). */
export interface PlanDeps {
  secrets(context: RpcContext): readonly string[];
}

/** The plan RPC methods: begin, approve (ask the user), end. */
export function planMethods(deps: PlanDeps): Record<string, RpcMethod> {
  const plansOf = (context: Parameters<RpcMethod>[1]) => {
    if (!context.plans) throw new RpcError("PermissionError", "Plans need a run to belong to");
    return context.plans;
  };
  return {
    plan_begin(params, context) {
      const description = typeof params.description === "string" ? params.description : "";
      return Promise.resolve({ id: plansOf(context).begin(description) });
    },
    async plan_approve(params, context) {
      const plan = plansOf(context).get(params.id);
      if (plan.state !== "rehearsing") {
        throw new RpcError("PermissionError", "This plan was already put to the user");
      }
      plan.state = "asking";
      if (plan.overflow) {
        plan.state = "declined";
        throw new RpcError(
          "PermissionError",
          `The plan records more than ${PLAN_LIMITS.calls} calls or ${PLAN_LIMITS.argumentChars} characters of ` +
            "arguments, too many to put to the user; split it into smaller plans. Nothing in it ran",
        );
      }
      const request = planRequest(plan, deps.secrets(context));
      const answer = context.approve ? await context.approve(request) : {
        approved: false,
        message: "The plan needs the user's approval, and nobody can be asked here",
      };
      if (!answer.approved) {
        plan.state = "declined";
        throw new RpcError(
          "PermissionError",
          `${answer.message ?? "The plan declined by the user"}; nothing in it ran`,
        );
      }
      if (answer.message) context.note?.(answer.message);
      plan.approve();
      return { approved: true, calls: plan.calls.length };
    },
    plan_end(params, context) {
      plansOf(context).end(params.id);
      return Promise.resolve(null);
    },
  };
}
