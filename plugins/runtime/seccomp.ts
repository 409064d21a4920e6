/**
 * codemode's seccomp profile for container sandboxes: an allowlist (seccomp.json, embedded in the binary)
 * written to a file the engine CLI can read and passed as `--security-opt seccomp=<path>`. The engines'
 * own defaults differ and leave kernel attack surface open that Python never needs (user namespaces,
 * io_uring, keyrings, ptrace, 32-bit syscalls...); docs/security.md has the measurements.
 * @module
 */

import { createHash, randomBytes } from "node:crypto";
import { chmod, lstat, mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import process from "node:process";
import type { Problem } from "../../core/contracts/runtime.ts";
import { ProblemError } from "./_oci_exec.ts";
import profile from "./seccomp.json" with { type: "json" };

/** Which profile sandboxes get: "codemode" (the built-in one), "engine" (the engine's default) or a path. */
export type SeccompChoice = "codemode" | "engine" | string;

/** One rule of a profile in the engines' (docker's) format. */
export interface SeccompRule {
  comment?: string;
  names: string[];
  action: string;
  errnoRet?: number;
  args?: { index: number; value: number; valueTwo: number; op: string }[];
}

/** The built-in profile as the JSON text written for the engines. */
export const SECCOMP_PROFILE: string = JSON.stringify(profile, null, 2) + "\n";

/**
 * The built-in profile adapted for gVisor, whose runsc applies an OCI profile inside its own kernel
 * (`--oci-seccomp`). Measured with runsc 2022-12 (docs/security.md#gvisor): it answers EPERM for every
 * refusal, ignoring `errnoRet` and `defaultErrnoRet`, and it looks names up in its own syscall table,
 * skipping the ones it spells differently. So: `clone3` is allowed, because an EPERM there stops glibc
 * from falling back to `clone` ("can't start new thread") and gVisor answers ENOSYS for it itself; and
 * `pselect6` is also allowed under gVisor's name for it, `pselect`, without which `select()` fails.
 * Every other rule is the built-in profile's.
 */
export function gvisorProfile(base: { syscalls: SeccompRule[] } & Record<string, unknown> = profile): string {
  const syscalls = base.syscalls.map((rule) => {
    if (rule.names.length === 1 && rule.names[0] === "clone3") {
      return {
        comment: "clone3: gVisor answers ENOSYS itself, so glibc falls back to clone",
        names: ["clone3"],
        action: "SCMP_ACT_ALLOW",
      };
    }
    if (rule.action === "SCMP_ACT_ALLOW" && !rule.args && rule.names.includes("pselect6")) {
      return {
        ...rule,
        names: [...rule.names, ...GVISOR_NAMES.filter((name) => !rule.names.includes(name))],
      };
    }
    return rule;
  });
  return JSON.stringify({ ...base, syscalls }, null, 2) + "\n";
}

/** Syscalls gVisor's table names differently from Linux's (pselect6 is "pselect" there). */
const GVISOR_NAMES = ["pselect"];

/** {@link gvisorProfile} of the built-in profile, as written for runsc. */
export const GVISOR_SECCOMP_PROFILE: string = gvisorProfile();

/** Syscalls the built-in profile refuses with EPERM, whatever their arguments (from seccomp.json). */
export const DENIED_SYSCALLS: readonly string[] = (profile.syscalls as SeccompRule[])
  .filter((rule) => rule.action === "SCMP_ACT_ERRNO" && !rule.args && rule.errnoRet === 1)
  .flatMap((rule) => rule.names)
  .sort();

/**
 * The path to pass as `seccomp=<path>` for `choice`, or undefined for the engine's default profile.
 * The built-in profile goes to a file named after its hash in a directory only this user can write but
 * everyone can read (a rootless engine run as another user reads it too); `gvisor` writes its variant for
 * runsc ({@link gvisorProfile}). Rejects with a fix when a custom profile cannot be read or is not JSON.
 */
export async function seccompProfilePath(
  choice: SeccompChoice = "codemode",
  base = tmpdir(),
  options: { gvisor?: boolean } = {},
): Promise<string | undefined> {
  if (choice === "engine") return undefined;
  if (choice !== "codemode") return await checkedCustom(choice);
  const text = options.gvisor ? GVISOR_SECCOMP_PROFILE : SECCOMP_PROFILE;
  const hash = createHash("sha256").update(text).digest("hex").slice(0, 16);
  const dir = await profileDir(base);
  const path = join(dir, `seccomp-${options.gvisor ? "gvisor-" : ""}${hash}.json`);
  const existing = await readFile(path, "utf8").catch(() => undefined);
  if (existing === text) return path;
  // Write and rename, so a concurrent start never reads half a profile.
  const partial = join(dir, `.seccomp-${randomBytes(6).toString("hex")}.tmp`);
  try {
    await writeFile(partial, text, { mode: 0o644 });
    await chmod(partial, 0o644); // the umask may have narrowed it
    await rename(partial, path);
  } finally {
    await rm(partial, { force: true });
  }
  return path;
}

// Where the profile went when `<base>/codemode-<uid>` was taken, so each start does not make another.
const fallbackDirs = new Map<string, string>();

/** `<base>/codemode-<uid>`, or a fresh directory of ours when that name is taken by someone else. */
async function profileDir(base: string): Promise<string> {
  const uid = process.getuid?.() ?? 0;
  const dir = join(base, `codemode-${uid}`);
  await mkdir(dir, { mode: 0o755 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EEXIST") throw error;
  });
  // In a shared /tmp another user could have created the name first, to hand us a weaker profile.
  const ours = async (path: string) => {
    const info = await lstat(path).catch(() => undefined);
    return Boolean(info?.isDirectory() && info.uid === uid && (info.mode & 0o022) === 0);
  };
  if (await ours(dir)) return dir;
  const known = fallbackDirs.get(base);
  if (known && await ours(known)) return known;
  const fresh = await mkdtemp(join(base, "codemode-seccomp-"));
  await chmod(fresh, 0o755);
  fallbackDirs.set(base, fresh);
  return fresh;
}

/** A custom profile that cannot be used, with the problem doctor and `detect()` report. */
export class SeccompProfileError extends ProblemError {
  constructor(problem: Problem) {
    super(problem);
    this.name = "SeccompProfileError";
  }
}

async function checkedCustom(path: string): Promise<string> {
  const absolute = resolve(path); // engine CLIs run with cwd "/"
  try {
    JSON.parse(await readFile(absolute, "utf8"));
  } catch (error) {
    const reason = error instanceof SyntaxError ? "not JSON" : (error as NodeJS.ErrnoException).code ?? error;
    throw new SeccompProfileError({
      message: `Cannot use the seccomp profile "${absolute}" (${reason})`,
      fix:
        `Set CODEMODE_SECCOMP to a readable JSON profile, "engine" for the engine's default, or unset it ` +
        `for codemode's`,
    });
  }
  return absolute;
}
