/**
 * Whether a syscall attempt from a sandbox was contained, and by which layer. A probe passes when the call
 * did not take effect, whichever layer stopped it: codemode's seccomp filter, a capability check (the
 * sandbox has none and runs as uid 65534), or the kernel itself lacking the feature (a kernel built
 * without IA-32 emulation faults `int 0x80` with SIGSEGV before seccomp is consulted; one without
 * io_uring answers ENOSYS). Kernels differ between machines, so the verdict never depends on which of
 * those signals a particular kernel sends; it only says which layer it was.
 * @module
 */
import profile from "../../plugins/runtime/seccomp.json" with { type: "json" };
import type { SeccompRule } from "../../plugins/runtime/seccomp.ts";

/** The layer that stopped a call. */
export type Layer = "seccomp" | "capabilities" | "kernel";

/** The verdict on one attempt: contained or not, and by what. */
export interface Containment {
  contained: boolean;
  /** Who stopped the call; absent when nothing did. */
  layer?: Layer;
  /** What the call returned: "ok", an errno name, or "killed:<signal>". */
  outcome: string;
}

/** Answers of a permission check: the kernel refused the caller. */
const DENIALS = new Set(["EPERM", "EACCES"]);
/** Answers of a kernel without the feature: no such syscall, family or protocol, or no 32-bit entry. */
const ABSENT = new Set(["ENOSYS", "EAFNOSUPPORT", "EPROTONOSUPPORT", "EOPNOTSUPP", "killed:SIGSEGV"]);

/**
 * The verdict on `outcome`, given whether seccomp acted on the call (`seccompActed`): see
 * {@link filterActed}, or the profile's rules for the syscall's name ({@link profileRefuses}). A call the
 * filter answered never reached the kernel.
 */
export function judge(outcome: string, seccompActed: boolean): Containment {
  if (seccompActed || outcome === "killed:SIGSYS") return { contained: true, layer: "seccomp", outcome };
  if (DENIALS.has(outcome)) return { contained: true, layer: "capabilities", outcome };
  if (ABSENT.has(outcome)) return { contained: true, layer: "kernel", outcome };
  return { contained: false, outcome };
}

/** An errno no probed syscall returns by itself (RF-kill), so a marked profile's answers stand out. */
export const MARK_ERRNO = 132;
/** The name Python's errno module gives {@link MARK_ERRNO}. */
export const MARK = "ERFKILL";

/**
 * codemode's profile with every refusal turned into {@link MARK_ERRNO}: run a probe under it and each
 * call that answers MARK (or is killed by SIGSYS) was stopped by the filter, whatever the kernel would
 * have said. The rules and their order are unchanged, so the filter decides exactly as the real one.
 * docker 20.10 ignores `defaultErrnoRet` (its default action answers EPERM), so refusals by the default
 * action are found by comparison with {@link kernelOnlyProfile} instead.
 */
export function markedProfile(): string {
  const rules = (profile.syscalls as SeccompRule[]).map((rule) =>
    rule.action === "SCMP_ACT_ERRNO" ? { ...rule, errnoRet: MARK_ERRNO } : rule
  );
  return JSON.stringify({ ...profile, defaultErrnoRet: MARK_ERRNO, syscalls: rules });
}

/** A profile that allows every call: what the kernel and the missing capabilities contain on their own. */
export function kernelOnlyProfile(): string {
  return JSON.stringify({ defaultAction: "SCMP_ACT_ALLOW", syscalls: [] });
}

/**
 * Whether the filter stopped a call, from its outcomes under codemode's profile (`real`), the marked copy
 * and the kernel-only profile: it answered with the mark, or the real outcome differs from what the
 * kernel alone says (the default action's answer on docker). A call both refuse the same way is judged
 * by the kernel's answer, which would have contained it without the filter.
 */
export function filterActed(real: string, marked: string, kernelOnly: string): boolean {
  return marked === MARK || real === "killed:SIGSYS" || real !== kernelOnly;
}

/**
 * Whether codemode's profile refuses `syscall` whatever its arguments: true for a syscall it denies or
 * never names (the default action refuses), false for one it allows, undefined when its arguments decide.
 */
export function profileRefuses(syscall: string): boolean | undefined {
  const rules = (profile.syscalls as SeccompRule[]).filter((rule) => rule.names.includes(syscall));
  if (!rules.length) return profile.defaultAction !== "SCMP_ACT_ALLOW";
  if (rules.some((rule) => rule.args?.length)) return undefined;
  return rules.every((rule) => rule.action !== "SCMP_ACT_ALLOW");
}

/** One line per verdict, for test output and failure messages: `call: outcome (layer)`. */
export function describe(verdicts: Record<string, Containment>): string {
  return Object.entries(verdicts)
    .map(([call, v]) => `  ${call}: ${v.outcome} (${v.layer ?? "NOT CONTAINED"})`)
    .join("\n");
}
