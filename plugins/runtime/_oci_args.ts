/**
 * The hardened `run` argument list of the OCI runtimes, built by one pure function from resolved options,
 * so tests check it flag by flag.
 * @module
 */

import type { SandboxLimits, SandboxStartOptions } from "../../core/contracts/runtime.ts";
import { type OciEngine, parseMemory } from "./_oci_exec.ts";
import { mountArgs } from "./_oci_mounts.ts";
import { GVISOR_DEFAULTS, gvisorHostPids, type GvisorOptions, gvisorRunArgs } from "./gvisor.ts";
import type { SeccompChoice } from "./seccomp.ts";

/** The label every sandbox carries, so leftovers of a crashed server can be found and reaped. */
export const MANAGED_LABEL = "codemode.managed";
/** The label gVisor sandboxes carry (`codemode.isolation=gvisor`). */
export const ISOLATION_LABEL = "codemode.isolation";

/** Options shared by the podman, docker and nerdctl plugins. */
export interface OciOptions {
  /** The engine CLI as an argv prefix, e.g. ["podman"] or ["runuser", "-u", "someone", "--", "podman"]. */
  command?: string[];
  /** OCI runtime passed as `--runtime` (e.g. "runc"); undefined uses the engine's default. */
  runtime?: string;
  /** Arguments added to `run` before the image (escape hatch; they can weaken the sandbox). */
  extraArgs?: string[];
  /** Run a minimal init as PID 1 that reaps orphans and forwards signals. */
  init?: boolean;
  /** RLIMIT_NOFILE, soft and hard; explicit because engine defaults can exceed the host's hard limit. */
  nofile?: number;
  /** RLIMIT_NPROC, soft and hard; undefined derives it from the pids limit. */
  nproc?: number;
  /** Size of each of the /tmp and /workspace tmpfs mounts. */
  tmpfsSize?: string;
  /** The image `detect()` checks for and probes. */
  image?: string;
  /** Seccomp profile: "codemode" (default, the built-in allowlist), "engine" (its default) or a path. */
  seccomp?: SeccompChoice;
  /** Hand frames a direct socket as fd 3 (`--preserve-fds`); podman only, on by default there. */
  directChannel?: boolean;
  /** "gvisor" runs every sandbox under gVisor's runsc (never runc); default "container". */
  isolation?: "container" | "gvisor";
  /** How gVisor sandboxes run (gvisor.ts). */
  gvisor?: GvisorOptions;
}

/** Everything `buildRunArgs` needs besides the start options: resolved, with no defaults left to apply. */
export interface OciRunConfig {
  engine: OciEngine;
  runtime?: string;
  init: boolean;
  nofile: number;
  nproc: number;
  tmpfsSize: string;
  /** Also cap memory with RLIMIT_DATA (bytes), for hosts where the engine cannot apply cgroup limits. */
  dataLimit?: number;
  /** Path of the seccomp profile file; undefined leaves the engine's default profile. */
  seccomp?: string;
  extraArgs: string[];
  /** Pass the sandbox a direct channel as fd 3 (`--preserve-fds 1`). */
  channel: boolean;
  /** Run under gVisor: `runtime` is runsc's absolute path (podman) or docker's name for it. */
  gvisor?: { runtime: string; platform: string };
  /** The pids cgroup limit when it is not the sandbox's own cap (gVisor: runsc's host tasks). */
  hostPids?: number;
}

/** Builds the `run` arguments (after the CLI prefix) for one sandbox; pure, so tests check it flag by flag. */
export function buildRunArgs(start: SandboxStartOptions, config: OciRunConfig): string[] {
  const { limits } = start;
  const labels: Record<string, string> = {
    ...start.labels,
    [MANAGED_LABEL]: "true",
    ...(config.gvisor ? { [ISOLATION_LABEL]: "gvisor" } : {}),
  };
  const tmpfs = `rw,noexec,nosuid,nodev,size=${config.tmpfsSize},mode=1777`;
  const args = ["run", "-i", "--rm", "--name", start.name];
  for (const key of Object.keys(labels).sort()) args.push("--label", `${key}=${labels[key]}`);
  args.push(
    // No registry is contacted while starting a sandbox; a missing image fails fast instead.
    "--pull",
    "never",
    "--network",
    "none",
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    ...(config.seccomp ? ["--security-opt", `seccomp=${config.seccomp}`] : []),
    "--user",
    "65534:65534",
    "--memory",
    limits.memory,
    "--memory-swap",
    limits.memory,
    "--pids-limit",
    String(config.hostPids ?? limits.pids),
  );
  if (limits.cpus !== undefined) args.push("--cpus", limits.cpus);
  args.push("--tmpfs", `/tmp:${tmpfs}`, "--tmpfs", `/workspace:${tmpfs}`);
  for (const mount of start.mounts ?? []) args.push(...mountArgs(config.engine, mount));
  args.push("--ulimit", `nofile=${config.nofile}:${config.nofile}`);
  args.push("--ulimit", `nproc=${config.nproc}:${config.nproc}`);
  if (config.dataLimit !== undefined) args.push("--ulimit", `data=${config.dataLimit}:${config.dataLimit}`);
  args.push("--workdir", "/workspace");
  // Without an init, Python is PID 1: orphans of user code become zombies that count against the pids
  // limit for the whole session, and PID 1 ignores signals it has no handler for.
  if (config.init) args.push("--init");
  // Under gVisor, runsc replaces the runtime option: a sandbox asked for gVisor never runs under runc.
  if (config.gvisor) {
    args.push(...gvisorRunArgs(config.engine, config.gvisor.runtime, config.gvisor.platform));
  } else if (config.runtime) args.push("--runtime", config.runtime);
  if (config.channel) args.push("--preserve-fds", "1");
  if (config.engine === "podman") {
    // --read-only alone still gives writable, executable /run and /var/tmp; --http-proxy would copy the
    // CLI's proxy variables into the container; --env-host=false guards against a containers.conf default.
    args.push("--read-only-tmpfs=false", "--http-proxy=false", "--env-host=false");
  }
  // The protocol stream is not kept in a log file (disk use, and a copy of everything the agent sent).
  // nerdctl has no "none" driver.
  if (config.engine !== "nerdctl") args.push("--log-driver", "none");
  args.push(...config.extraArgs, start.image, ...start.command);
  return args;
}

/** Resolves plugin options and limits into a run config; `cgroupLimits` is false where the engine cannot
 * apply memory and pids limits (rootless on cgroup v1), so ulimits stand in for them; `seccomp` is the
 * profile file's path; `gvisor` the runtime that runs runsc (its path, or docker's name for it) and whether
 * that runsc can pass the channel fd (runsc 2022-12 rejects `--preserve-fds`). */
export function runConfigFor(
  engine: OciEngine,
  options: OciOptions,
  limits: SandboxLimits,
  cgroupLimits: boolean,
  seccomp?: string,
  gvisor?: { runtime: string; channel: boolean },
): OciRunConfig {
  return {
    engine,
    runtime: options.runtime,
    init: options.init ?? true,
    nofile: options.nofile ?? 1024,
    // RLIMIT_NPROC counts every process of the sandbox uid on the host (or user namespace), not per
    // container: leave headroom for other sandboxes where the pids cgroup caps each one, and make it the
    // cap itself where cgroup limits are not applied.
    // Under gVisor RLIMIT_NPROC is enforced by gVisor's kernel, which counts this sandbox's tasks alone.
    nproc: options.nproc ?? (cgroupLimits && !gvisor ? limits.pids * 4 : limits.pids),
    tmpfsSize: options.tmpfsSize ?? "256m",
    dataLimit: cgroupLimits ? undefined : parseMemory(limits.memory),
    seccomp,
    extraArgs: options.extraArgs ?? [],
    // docker and nerdctl hand stdio to a daemon, so an fd of ours cannot reach the container.
    channel: engine === "podman" && (options.directChannel ?? true) && (gvisor?.channel ?? true),
    ...(gvisor
      ? {
        gvisor: { runtime: gvisor.runtime, platform: options.gvisor?.platform ?? GVISOR_DEFAULTS.platform },
        hostPids: gvisorHostPids(limits.pids),
      }
      : {}),
  };
}
