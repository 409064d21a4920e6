/**
 * The policy: which servers and tools sandbox code may reach, how many tool calls one run may make, and
 * which calls the user must approve first (`confirm` globs, and every tool that may change things when
 * `confirmDestructive` is on).
 * Rules are glob lists (`*` any run of characters, `?` one character) matched against a name and its
 * Python alias; deny beats allow. Tool patterns are `server/tool`, or `tool` for a tool of any server.
 * Every refusal says which rule refused and where that rule was set (a variable or a config file).
 * @module
 */
import { globMatches, toolGlobMatches } from "./globs.ts";
import type { Settings } from "./settings.ts";
import { withoutUndefined } from "../without_undefined.ts";

/** The rules a policy enforces (the matching settings, validated). */
export interface PolicyRules {
  allowServers: string[];
  denyServers: string[];
  allowTools: string[];
  denyTools: string[];
  /** Only tools annotated `readOnlyHint: true` may be called. */
  readOnly: boolean;
  /** Tool calls one run may make (undefined: no limit). */
  maxToolCalls?: number;
  /** Tools whose calls the user must approve first (globs of server/tool). */
  confirm: string[];
  /** Every tool not annotated read-only or non-destructive needs the user's approval. */
  confirmDestructive: boolean;
}

/** Where each rule was set: a variable name or a config file path; absent means the default. */
export type RuleSources = Partial<Record<keyof PolicyRules, string>>;

/** A policy decision: allowed, or refused with a sentence saying which rule refused. */
export type Verdict = { ok: true } | { ok: false; reason: string };

/** The annotations a tool may carry (MCP `ToolAnnotations`); only the two hints below matter here. */
export interface ToolHints {
  readOnlyHint?: unknown;
  destructiveHint?: unknown;
}

/** Rules that refuse nothing: every server, every tool, no limit. */
export const OPEN_RULES: PolicyRules = {
  allowServers: ["*"],
  denyServers: [],
  allowTools: ["*"],
  denyTools: [],
  readOnly: false,
  confirm: [],
  confirmDestructive: false,
};

/** Each rule's variable, named in a refusal when the policy was built without sources. */
const RULE_ENV: Record<keyof PolicyRules, string> = {
  allowServers: "CODEMODE_ALLOW_SERVERS",
  denyServers: "CODEMODE_DENY_SERVERS",
  allowTools: "CODEMODE_ALLOW_TOOLS",
  denyTools: "CODEMODE_DENY_TOOLS",
  readOnly: "CODEMODE_READ_ONLY",
  maxToolCalls: "CODEMODE_MAX_TOOL_CALLS",
  confirm: "CODEMODE_CONFIRM_TOOLS",
  confirmDestructive: "CODEMODE_CONFIRM_DESTRUCTIVE",
};

const OK: Verdict = { ok: true };

/** Decides what sandbox code may reach. Immutable; cheap to consult on every call. */
export class Policy {
  readonly rules: PolicyRules;
  readonly sources: RuleSources;

  /** A policy over `rules`; `sources` only make refusals say where a rule came from. */
  constructor(rules: Partial<PolicyRules> = {}, sources: RuleSources = {}) {
    this.rules = { ...OPEN_RULES, ...withoutUndefined(rules) };
    this.sources = sources;
  }

  /** True when some calls need the user's approval. */
  get asksApproval(): boolean {
    return this.rules.confirm.length > 0 || this.rules.confirmDestructive;
  }

  /** True when no rule can refuse anything (approvals ask; they are not refusals). */
  get open(): boolean {
    const r = this.rules;
    return r.allowServers.includes("*") && !r.denyServers.length && r.allowTools.includes("*") &&
      !r.denyTools.length && !r.readOnly && r.maxToolCalls === undefined;
  }

  /** Whether sandbox code may use the server `name` at all. */
  allowsServer(name: string): Verdict {
    const denied = this.rules.denyServers.find((g) => globMatches(g, name));
    if (denied !== undefined) {
      return refuse(`Server "${name}" is denied by policy (${this.#rule("denyServers")} has "${denied}")`);
    }
    if (!this.rules.allowServers.some((g) => globMatches(g, name))) {
      return refuse(
        `Server "${name}" is not allowed by policy (${this.#rule("allowServers")} allows only ${
          quoted(this.rules.allowServers)
        })`,
      );
    }
    return OK;
  }

  /** Whether sandbox code may see and call `tool` of `server`, given the tool's annotations. */
  allowsTool(server: string, tool: string, annotations?: ToolHints): Verdict {
    const serverVerdict = this.allowsServer(server);
    if (!serverVerdict.ok) return serverVerdict;
    const matches = (glob: string) => toolGlobMatches(glob, server, tool);
    const denied = this.rules.denyTools.find(matches);
    const id = `${server}/${tool}`;
    if (denied !== undefined) {
      return refuse(`Tool "${id}" is denied by policy (${this.#rule("denyTools")} has "${denied}")`);
    }
    if (!this.rules.allowTools.some(matches)) {
      return refuse(
        `Tool "${id}" is not allowed by policy (${this.#rule("allowTools")} allows only ${
          quoted(this.rules.allowTools)
        })`,
      );
    }
    if (this.rules.readOnly && !isReadOnly(annotations)) {
      return refuse(
        `Tool "${id}" is refused by policy: read-only mode (${
          this.#rule("readOnly")
        }) allows only tools annotated readOnlyHint, and this one is not`,
      );
    }
    return OK;
  }

  /**
   * Why the user must approve a call of `tool` before it goes out (the rule, where it was set), or
   * undefined when the call needs no approval. Ask only about calls the policy allows: deny comes first.
   */
  approvalReason(server: string, tool: string, annotations?: ToolHints): string | undefined {
    const glob = this.rules.confirm.find((g) => toolGlobMatches(g, server, tool));
    if (glob !== undefined) return `${this.#rule("confirm")} has "${glob}"`;
    if (this.rules.confirmDestructive && mayChangeThings(annotations)) {
      return `${this.#rule("confirmDestructive")} asks before every tool that may change things, and this ` +
        "one is not annotated readOnlyHint or destructiveHint: false";
    }
    return undefined;
  }

  /** Whether a run that already made `made` tool calls may make one more. */
  allowsCall(made: number): Verdict {
    const max = this.rules.maxToolCalls;
    if (max === undefined || made < max) return OK;
    return refuse(
      `Tool call refused by policy: this run already made its ${max} allowed tool calls (${
        this.#rule("maxToolCalls")
      }); return what you have and continue in a new run_python call`,
    );
  }

  /** How a rule is named in messages: its variable, or its key and the config file that set it. */
  #rule(key: keyof PolicyRules): string {
    const source = this.sources[key];
    if (!source) return RULE_ENV[key];
    return /^[A-Z][A-Z0-9_]*$/.test(source) ? source : `${key} in ${source}`;
  }
}

/** The policy that settings describe (from the config file and the environment). */
export function policyOf(settings: Pick<Settings, keyof PolicyRules | "sources">): Policy {
  const keys = Object.keys(RULE_ENV) as (keyof PolicyRules)[];
  const rules = Object.fromEntries(keys.map((k) => [k, settings[k]])) as Partial<PolicyRules>;
  const sources = Object.fromEntries(
    keys.filter((k) => settings.sources?.[k]).map((k) => [k, settings.sources![k]]),
  ) as RuleSources;
  return new Policy(rules, sources);
}

/** Whether a tool's annotations say it only reads (`readOnlyHint: true`); a tool without them may not. */
export function isReadOnly(annotations?: ToolHints): boolean {
  return annotations?.readOnlyHint === true;
}

/**
 * Whether a tool may change things, by the spec's defaults: unless it says `readOnlyHint: true` or
 * `destructiveHint: false`, it may be destructive (an unannotated tool included).
 */
export function mayChangeThings(annotations?: ToolHints): boolean {
  return !isReadOnly(annotations) && annotations?.destructiveHint !== false;
}

function refuse(reason: string): Verdict {
  return { ok: false, reason };
}

function quoted(globs: string[]): string {
  return globs.length ? globs.map((g) => `"${g}"`).join(", ") : "nothing";
}
