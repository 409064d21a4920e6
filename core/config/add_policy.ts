/**
 * Which registry servers sandbox code may add: `CODEMODE_ADD_SERVERS` (off, ask, allow) and the
 * `CODEMODE_ADD_ALLOW` / `CODEMODE_ADD_DENY` globs, matched against the entry's registry name
 * (`io.github.modelcontextprotocol/*`) and its package as `npm:<identifier>`, `pypi:<identifier>`,
 * `oci:<image>` or `remote:<host>`. Deny beats allow. The server allow/deny lists of the policy apply
 * to the added server's alias as well (policy.ts). Every refusal names the rule and where it was set.
 * @module
 */
import { globMatches } from "./globs.ts";
import type { Settings } from "./settings.ts";
import type { Verdict } from "./policy.ts";

/** Whether servers can be added, and whether the user is asked first. */
export type AddMode = "off" | "ask" | "allow";

/** What a rule is matched against: the registry name, and the package it would run (when known). */
export interface AddCandidate {
  name: string;
  /** `npm:<identifier>`, `pypi:<identifier>`, `oci:<image>` or `remote:<host>`. */
  target?: string;
}

/** The rules over added servers. */
export class AddPolicy {
  readonly mode: AddMode;
  readonly allow: string[];
  readonly deny: string[];
  #sources: { allow?: string; deny?: string; mode?: string };

  /** Rules as settings give them; `sources` only name where each was set. */
  constructor(
    mode: AddMode,
    allow: string[] = ["*"],
    deny: string[] = [],
    sources: { allow?: string; deny?: string; mode?: string } = {},
  ) {
    this.mode = mode;
    this.allow = allow;
    this.deny = deny;
    this.#sources = sources;
  }

  /** Whether adding is on at all; a refusal says how to turn it on. */
  enabled(): Verdict {
    if (this.mode !== "off") return { ok: true };
    const where = this.#rule("mode", "CODEMODE_ADD_SERVERS");
    return {
      ok: false,
      reason:
        `Adding servers is off (${where} is "off"); the user can set CODEMODE_ADD_SERVERS=ask to be asked`,
    };
  }

  /** Whether the entry may be added: deny globs first, then the allow list. */
  allows(candidate: AddCandidate): Verdict {
    const keys = [candidate.name, ...candidate.target ? [candidate.target] : []];
    const denied = this.deny.find((glob) => keys.some((key) => globMatches(glob, key)));
    if (denied !== undefined) {
      return {
        ok: false,
        reason: `"${candidate.name}" is denied by policy (${
          this.#rule("deny", "CODEMODE_ADD_DENY")
        } has "${denied}")`,
      };
    }
    if (!this.allow.some((glob) => keys.some((key) => globMatches(glob, key)))) {
      const allowed = this.allow.length ? this.allow.map((g) => `"${g}"`).join(", ") : "nothing";
      return {
        ok: false,
        reason: `"${candidate.name}" is not allowed by policy (${
          this.#rule("allow", "CODEMODE_ADD_ALLOW")
        } allows only ${allowed})`,
      };
    }
    return { ok: true };
  }

  #rule(key: "allow" | "deny" | "mode", variable: string): string {
    const source = this.#sources[key];
    if (!source || /^[A-Z][A-Z0-9_]*$/.test(source)) return source ?? variable;
    return `add_${key === "mode" ? "servers" : key} in ${source}`;
  }
}

/** The add policy settings describe. */
export function addPolicyOf(
  settings: Pick<Settings, "addServers" | "addAllow" | "addDeny" | "sources">,
): AddPolicy {
  const sources = settings.sources ?? {};
  return new AddPolicy(settings.addServers, settings.addAllow, settings.addDeny ?? [], {
    allow: sources.addAllow,
    deny: sources.addDeny,
    mode: sources.addServers,
  });
}

/** The package an entry runs, as the `npm:`, `pypi:`, `oci:` and `remote:` globs see it. */
export function addTarget(type: string | undefined, target: string | undefined): string | undefined {
  return type && target ? `${type}:${target}` : undefined;
}
