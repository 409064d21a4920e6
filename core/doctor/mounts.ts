/**
 * `codemode doctor` on mounts: each host folder the sandbox sees, where, read-only or not, and how the
 * runtime in use brings it in (a bind mount with nodev, nosuid and noexec, or a copy under Pyodide), or
 * why it cannot.
 * @module
 */
import type { RuntimePlugin, SandboxMount } from "../contracts/runtime.ts";
import type { CheckStatus, Finding } from "./finding.ts";

/** One mount as doctor reports it. */
export interface MountCheck {
  host: string;
  target: string;
  mode: "ro" | "rw";
  /** How the runtime in use mounts it. */
  how: string;
  status: CheckStatus;
  problem?: { message: string; fix?: string };
}

/** A check per mount, for the runtime codemode would use (undefined when none works). */
export function checkMounts(mounts: SandboxMount[], runtime: RuntimePlugin | undefined): MountCheck[] {
  return mounts.map((mount) => {
    const base = {
      host: mount.host,
      target: mount.target,
      mode: mount.readOnly ? "ro" as const : "rw" as const,
    };
    if (!runtime) return { ...base, how: "no runtime works yet", status: "info" };
    const problem = runtime.mountProblem?.(mount) ??
      (runtime.mountMode ? undefined : `The ${runtime.name} runtime cannot mount host folders`);
    if (problem) {
      return {
        ...base,
        how: "refused",
        status: "fail",
        problem: { message: problem, fix: "Change the mount or the runtime (docs/files.md)" },
      };
    }
    if (runtime.mountMode === "copy") {
      return {
        ...base,
        how: `copied in at start (up to CODEMODE_MAX_MOUNT_COPY)${
          mount.readOnly ? "" : "; changes stay inside"
        }`,
        status: "ok",
      };
    }
    return { ...base, how: `${runtime.name} bind mount, nodev,nosuid,noexec`, status: "ok" };
  });
}

/** The findings of mount checks that failed. */
export function mountFindings(checks: MountCheck[]): Finding[] {
  return checks.filter((c) => c.problem && c.status === "fail").map((c) => ({
    status: c.status,
    subject: `mount ${c.target}`,
    ...c.problem!,
  }));
}
