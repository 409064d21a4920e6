/**
 * Host directories the sandbox sees (`CODEMODE_MOUNTS`, or `mounts:` in the config file), written
 * `HOST:SANDBOX[:ro|rw]` and read-only unless `rw` is written. The syntax and the sandbox side are checked
 * with the other settings; what needs the host's file system (the directory exists, and is not `/`, `$HOME`,
 * codemode's state or config directory, or a pseudo file system) is checked once every setting is known,
 * by {@link resolveMounts}. Mounting is the one way host files enter a container, so these rules refuse
 * anything that would hand sandbox code more than the user meant to give it.
 * @module
 */
import * as z from "zod";
import { realpathSync, statSync } from "node:fs";
import { isAbsolute, posix, resolve } from "node:path";
import type { SandboxMount } from "../contracts/runtime.ts";

/** One mount; its `host` is as written until {@link resolveMounts}, then absolute with symlinks resolved. */
export type MountSpec = SandboxMount;

/** Sandbox paths a mount may use: these folders and anything under them (see {@link targetProblem}). */
export const MOUNT_ROOTS: readonly string[] = ["/data", "/mnt", "/workspace"];

/** Where the sandbox collects artifacts; no mount may cover it. */
const ARTIFACTS_TARGET = "/workspace/artifacts";

/** Host pseudo file systems: their "files" are the kernel's, not the user's. */
const PSEUDO_ROOTS = ["/proc", "/sys", "/dev"];

/** The `mounts` setting: comma-separated `HOST:SANDBOX[:ro|rw]` (a config file may give a list). */
export function mountList() {
  return z.string().transform((raw, ctx) => {
    const mounts: MountSpec[] = [];
    for (const entry of raw.split(",").map((e) => e.trim()).filter(Boolean)) {
      const parsed = parseMount(entry);
      if (typeof parsed === "string") {
        ctx.addIssue({ code: "custom", message: `mount "${entry}": ${parsed}` });
        return z.NEVER;
      }
      mounts.push(parsed);
    }
    const overlap = overlapping(mounts);
    if (overlap) {
      ctx.addIssue({ code: "custom", message: overlap });
      return z.NEVER;
    }
    return mounts;
  });
}

/** One `HOST:SANDBOX[:ro|rw]` entry, or why it cannot be one. */
export function parseMount(entry: string): MountSpec | string {
  const parts = entry.split(":");
  if (parts.length < 2 || parts.length > 3) {
    return 'expected HOST:SANDBOX or HOST:SANDBOX:ro|rw (paths cannot contain ":" or ",")';
  }
  const [host, target, mode = "ro"] = parts.map((p) => p.trim());
  if (!host) return "the host path is empty";
  if (mode !== "ro" && mode !== "rw") return `unknown mode "${mode}": expected ro or rw`;
  const problem = targetProblem(target);
  if (problem) return problem;
  return { host, target, readOnly: mode === "ro" };
}

/** Why `target` cannot be a mount's sandbox path, or undefined when it can. */
export function targetProblem(target: string): string | undefined {
  if (!target.startsWith("/")) return `the sandbox path "${target}" must be absolute`;
  if (target !== "/" && (posix.normalize(target) !== target || target.endsWith("/"))) {
    return `the sandbox path "${target}" must be normalised (no "..", "." or repeated "/")`;
  }
  const under = (root: string) => target === root || target.startsWith(`${root}/`);
  if (under(ARTIFACTS_TARGET)) {
    return `the sandbox path "${target}" would hide ${ARTIFACTS_TARGET}, where artifacts are collected`;
  }
  if (target === "/workspace" || !MOUNT_ROOTS.some(under)) {
    return `the sandbox path "${target}" would shadow the sandbox's own files: use a path under ${
      MOUNT_ROOTS.join(", ")
    } (not /workspace itself)`;
  }
  return undefined;
}

function overlapping(mounts: MountSpec[]): string | undefined {
  for (const a of mounts) {
    for (const b of mounts) {
      if (a !== b && (a.target === b.target || a.target.startsWith(`${b.target}/`))) {
        return `the sandbox paths "${b.target}" and "${a.target}" overlap: give each mount its own folder`;
      }
    }
  }
  return undefined;
}

/** The host directories a mount must never expose, and where a relative host path starts from. */
export interface MountContext {
  home: string;
  stateDir: string;
  /** codemode's own config directory (`~/.config/codemode`). */
  configDir: string;
  /** Relative host paths are resolved against this (the config file's folder, or the working directory). */
  base: string;
}

/**
 * The mounts with their host paths resolved (`~` expanded, made absolute, symlinks followed), or the first
 * reason one of them is refused: a missing path, a file, `/`, `$HOME` or a folder holding it, codemode's
 * state or config directory (or a folder inside or holding one), or a pseudo file system.
 */
export function resolveMounts(mounts: MountSpec[], context: MountContext): MountSpec[] | string {
  const resolved: MountSpec[] = [];
  const real = (path: string) => {
    try {
      return realpathSync(path);
    } catch {
      return resolve(path);
    }
  };
  const home = real(context.home);
  const guarded = [
    { path: real(context.stateDir), what: "codemode's state directory", inside: true },
    { path: real(context.configDir), what: "codemode's config directory", inside: true },
  ];
  for (const mount of mounts) {
    const written = mount.host;
    const expanded = written === "~"
      ? context.home
      : written.startsWith("~/")
      ? `${context.home}/${written.slice(2)}`
      : written;
    const absolute = isAbsolute(expanded) ? resolve(expanded) : resolve(context.base, expanded);
    const refuse = (why: string) => `mount "${written}:${mount.target}": ${why}`;
    let host: string;
    try {
      host = realpathSync(absolute);
      if (!statSync(host).isDirectory()) {
        return refuse(
          `host path "${absolute}" is a file: mount the folder that holds it, or use codemode run --file`,
        );
      }
    } catch {
      return refuse(`host path "${absolute}" does not exist`);
    }
    if (host === "/") return refuse('the host\'s root "/" cannot be mounted');
    if (contains(host, home)) {
      return refuse(
        host === home
          ? `host path "${absolute}" is $HOME itself: mount a folder inside it`
          : `host path "${absolute}" holds $HOME: mount a folder inside $HOME instead`,
      );
    }
    for (const g of guarded) {
      if (contains(host, g.path) || contains(g.path, host)) {
        return refuse(
          `host path "${absolute}" is or holds ${g.what} ("${g.path}"), which sandbox code must not see`,
        );
      }
    }
    if (PSEUDO_ROOTS.some((root) => contains(root, host))) {
      return refuse(`host path "${absolute}" is part of a kernel pseudo file system, not a folder of files`);
    }
    resolved.push({ ...mount, host });
  }
  return resolved;
}

/** Whether `outer` is `inner` or one of its ancestors (both absolute and normalised). */
function contains(outer: string, inner: string): boolean {
  return inner === outer || outer === "/" || inner.startsWith(`${outer}/`);
}
