/**
 * gVisor for the OCI runtimes (`CODEMODE_ISOLATION=gvisor`): finding runsc, the flags it runs with, docker's
 * registration of it, what its failures mean, and what the host sees of a sandbox under it. Pure functions,
 * so tests check them argument by argument, but for the three that look at the machine ({@link findRunsc},
 * {@link gvisorRuntimeFor}, {@link runscPassesFds}); docs/security.md#gvisor says why each flag is there,
 * as measured.
 * @module
 */

import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import process from "node:process";
import type { IsolationEvidence, Problem } from "../../core/contracts/runtime.ts";
import { whichSync } from "./_executable.ts";
import {
  type DockerRuntimeEntry,
  engineEnv,
  type EngineFacts,
  execCli,
  type OciEngine,
  ProblemError,
} from "./_oci_exec.ts";

/** How the OCI plugins run gVisor sandboxes. */
export interface GvisorOptions {
  /** The runsc binary: a path, or a name looked up on PATH. */
  runsc?: string;
  /** runsc's `--platform`: how it intercepts system calls. */
  platform?: string;
  /** The name docker's daemon config gives runsc, with {@link runscFlags} as its runtimeArgs. */
  dockerRuntime?: string;
}

/** Defaults: ptrace works on every machine (kvm needs /dev/kvm and hung where it was there; systrap is
 * newer than Debian 12's runsc). */
export const GVISOR_DEFAULTS = {
  runsc: "runsc",
  platform: "ptrace",
  dockerRuntime: "codemode-gvisor",
} satisfies Required<GvisorOptions>;

/** {@link GvisorOptions} with the defaults filled in. */
export type ResolvedGvisor = Required<GvisorOptions>;

/** The options with their defaults. */
export function resolveGvisor(options: GvisorOptions = {}): ResolvedGvisor {
  return {
    runsc: options.runsc ?? GVISOR_DEFAULTS.runsc,
    platform: options.platform ?? GVISOR_DEFAULTS.platform,
    dockerRuntime: options.dockerRuntime ?? GVISOR_DEFAULTS.dockerRuntime,
  };
}

/** How to install runsc, for findings. */
export const INSTALL_RUNSC =
  "Install gVisor: apt-get install runsc (Debian 12 and later), or set CODEMODE_RUNSC " +
  "to the runsc binary";

/**
 * runsc's own flags: no network stack at all (the container has none anyway: this leaves gVisor's netstack
 * out), the platform, and `oci-seccomp`, without which runsc ignores the OCI seccomp profile (the sandbox
 * then reports `Seccomp: 0`).
 */
export function runscFlags(platform: string): string[] {
  return ["network=none", `platform=${platform}`, "oci-seccomp"];
}

/**
 * The absolute path of the runsc binary `runsc` names (a path, or a name on `path`), or the problem with
 * an install fix. codemode passes this path to the engine itself, never relying on the engine's own table
 * of runtimes, which can name a runsc that is gone.
 */
export function findRunsc(
  runsc: string = GVISOR_DEFAULTS.runsc,
  path = process.env.PATH ?? "",
): { path: string; problem?: undefined } | { path?: undefined; problem: Problem } {
  const found = whichSync(runsc, path);
  // Absolute: engine CLIs run with cwd "/".
  if (found) return { path: resolve(found) };
  return {
    problem: {
      message: runsc.includes("/")
        ? `gVisor's runsc is not an executable file at "${runsc}" (CODEMODE_ISOLATION=gvisor)`
        : "gVisor's runsc is not installed: it is not on PATH (CODEMODE_ISOLATION=gvisor)",
      fix: `${INSTALL_RUNSC}; or unset CODEMODE_ISOLATION for runc containers`,
    },
  };
}

/**
 * The pids cgroup limit of a gVisor sandbox whose own tasks are capped at `pids`. The cgroup counts runsc's
 * host tasks, not the sandbox's: gVisor's kernel and its Go threads (~45 at idle) and a few host tasks
 * per sandbox process on the ptrace platform (a fork bomb held at 64 processes peaked at 459 host tasks,
 * at 128 at 720). The sandbox's own cap is RLIMIT_NPROC, which gVisor's kernel enforces.
 */
export function gvisorHostPids(pids: number): number {
  return 256 + 8 * pids;
}

/** Why `engine` cannot run gVisor sandboxes with codemode's hardening, or undefined when it can. */
export function gvisorEngineProblem(engine: OciEngine): Problem | undefined {
  if (engine !== "nerdctl") return undefined;
  return {
    message: "nerdctl cannot run sandboxes under gVisor with codemode's hardening: its --runtime takes no " +
      "runsc flags, so the seccomp profile (--oci-seccomp) and --network=none would be dropped",
    fix: "Use podman or docker with CODEMODE_ISOLATION=gvisor (CODEMODE_RUNTIME=podman), or unset it",
  };
}

/**
 * The `run` arguments that put a sandbox under gVisor: podman gets runsc by absolute path and its flags one
 * by one; docker only the runtime name its daemon config maps to runsc with those flags (checked by
 * {@link dockerRuntimeProblem}).
 */
export function gvisorRunArgs(engine: OciEngine, runtime: string, platform: string): string[] {
  if (engine === "docker") return ["--runtime", runtime];
  if (engine === "podman") {
    return ["--runtime", runtime, ...runscFlags(platform).flatMap((flag) => ["--runtime-flag", flag])];
  }
  throw new Error(gvisorEngineProblem(engine)!.message);
}

/**
 * What is wrong with docker's registration of runsc under `name`, or undefined when it runs `runsc` with
 * the flags codemode needs and no other network or platform. `resolve` maps a path to the file it names (symlinks followed).
 */
export function dockerRuntimeProblem(
  runtimes: Record<string, DockerRuntimeEntry> | undefined,
  name: string,
  runsc: string,
  platform: string,
  resolve: (path: string) => string = (path) => path,
): Problem | undefined {
  const wanted = runscFlags(platform).map((flag) => `--${flag}`);
  const entry = JSON.stringify({ path: runsc, runtimeArgs: wanted });
  const fix = `Add "runtimes": {"${name}": ${entry}} to /etc/docker/daemon.json, then reload dockerd ` +
    "(systemctl reload docker, or kill -HUP $(pidof dockerd)); scripts/setup.sh does this";
  const registered = runtimes?.[name];
  if (!registered) {
    return { message: `docker's daemon has no OCI runtime "${name}" for gVisor`, fix };
  }
  const path = registered.path ?? "";
  if (!path.startsWith("/") || resolve(path) !== resolve(runsc)) {
    return {
      message: `docker's runtime "${name}" runs "${path}", not the runsc codemode found at "${runsc}"`,
      fix,
    };
  }
  const args = registered.runtimeArgs ?? [];
  const missing = wanted.filter((flag) => !args.includes(flag));
  // Another network or platform given as well would leave runsc to pick one of them.
  const conflicting = args.filter((arg) => /^--(network|platform)=/.test(arg) && !wanted.includes(arg));
  if (missing.length || conflicting.length) {
    const wrong = [
      ...missing.map((flag) => `lacks ${flag}`),
      ...conflicting.map((flag) => `also has ${flag}`),
    ];
    return {
      message: `docker's runtime "${name}" ${wrong.join(", ")} (its runsc flags: "${args.join(" ")}")`,
      fix,
    };
  }
  return undefined;
}

/**
 * The gVisor runtime for one sandbox: runsc's absolute path (podman) or docker's registered name for it,
 * once runsc is found and `engine` can run it with codemode's hardening and limits; `channel` says whether
 * this runsc passes fd 3. Throws a ProblemError with the finding, so a sandbox asked to run under gVisor
 * fails rather than run under runc.
 */
export function gvisorRuntimeFor(
  engine: OciEngine,
  gvisor: ResolvedGvisor,
  known: Pick<EngineFacts, "cgroupLimits" | "runtimes">,
  channel: boolean,
): { runtime: string; channel: boolean } {
  const refused = gvisorEngineProblem(engine);
  if (refused) throw new ProblemError(refused);
  const found = findRunsc(gvisor.runsc, engineEnv().PATH);
  if (found.problem) throw new ProblemError(found.problem);
  if (!known.cgroupLimits) {
    throw new ProblemError({
      message: `Rootless ${engine} on cgroup v1 cannot cap a gVisor sandbox's memory: runsc skips cgroups ` +
        "there and does not enforce RLIMIT_DATA, which stands in for them under runc",
      fix: `Use rootful ${engine} or docker for CODEMODE_ISOLATION=gvisor, or a cgroup v2 host`,
    });
  }
  if (engine !== "docker") return { runtime: found.path, channel };
  const problem = known.runtimes &&
    dockerRuntimeProblem(known.runtimes, gvisor.dockerRuntime, found.path, gvisor.platform, resolvePath);
  if (problem) throw new ProblemError(problem);
  return { runtime: gvisor.dockerRuntime, channel: false };
}

/** What a runsc failure means, with a fix; undefined when the text shows no known runsc failure. */
export function diagnoseGvisor(stderr: string, platform: string): Problem | undefined {
  if (/rootless mode not supported/i.test(stderr)) {
    return {
      message: "runsc refused to run rootless here",
      fix: "Use rootful podman or docker for CODEMODE_ISOLATION=gvisor",
    };
  }
  if (/timed out after/i.test(stderr)) {
    return {
      message:
        `runsc did not start a sandbox in time on the "${platform}" platform (kvm hung on some machines)`,
      fix: "Set CODEMODE_GVISOR_PLATFORM=ptrace, which needs no hardware support",
    };
  }
  if (/\/dev\/kvm|platform[^\n]*(kvm|not supported|unknown|invalid)|invalid platform/i.test(stderr)) {
    return {
      message: `runsc cannot use the "${platform}" platform here: "${firstLine(stderr)}"`,
      fix: "Set CODEMODE_GVISOR_PLATFORM=ptrace, which needs no hardware support",
    };
  }
  if (/unknown or invalid runtime name|unknown runtime/i.test(stderr)) {
    return {
      message: `The engine does not know the gVisor runtime: "${firstLine(stderr)}"`,
      fix: "Register runsc with docker (see doctor, or rerun scripts/setup.sh)",
    };
  }
  if (/runsc/i.test(stderr)) {
    return {
      message: `runsc failed to start the sandbox: "${firstLine(stderr)}"`,
      fix: `Check \`runsc --version\`; try CODEMODE_GVISOR_PLATFORM=ptrace; or unset CODEMODE_ISOLATION`,
    };
  }
  return undefined;
}

/** What the host shows of one sandbox: the engine's record of its runtime and its host process. */
export interface HostView {
  engine: OciEngine;
  /** The OCI runtime the engine records (podman: a path; docker: a runtime name). */
  runtime: string;
  /** The arguments of the host process behind the container (its state's pid), NUL-separated. */
  cmdline: string;
}

/**
 * Whether the host's view proves the sandbox runs under gVisor with codemode's flags: the engine records the
 * runtime codemode asked for, and the process behind the container is runsc's sandbox (`runsc-sandbox ...
 * boot`) with no network stack and the OCI seccomp profile applied. runsc prints only flags that differ
 * from its defaults, so an absent `--platform` is runsc's default.
 */
export function gvisorEvidence(
  view: HostView,
  expected: { runtime: string; platform: string },
): IsolationEvidence {
  const args = view.cmdline.split("\0").filter(Boolean);
  const facts: string[] = [];
  const checks: boolean[] = [];
  const check = (ok: boolean, fact: string) => (checks.push(ok), facts.push(`${ok ? "" : "NOT: "}${fact}`));
  check(view.runtime === expected.runtime, `${view.engine} records the OCI runtime "${view.runtime}"`);
  check(args[0] === "runsc-sandbox" && args.includes("boot"), `the host process is "${args[0] ?? "gone"}"`);
  check(args.includes("--network=none"), "runsc runs with --network=none");
  check(args.includes("--oci-seccomp=true"), "runsc applies the OCI seccomp profile");
  const platform = args.find((arg) => arg.startsWith("--platform="))?.slice("--platform=".length);
  check(
    platform === undefined || platform === expected.platform,
    `runsc's platform is ${platform ?? `its default (asked: ${expected.platform})`}`,
  );
  return { isolation: "gvisor", proven: checks.every(Boolean), facts };
}

/** What the host shows of a sandbox that should share the host kernel: it must not be runsc's sandbox. */
export function containerEvidence(view: HostView): IsolationEvidence {
  const host = view.cmdline.split("\0")[0] ?? "";
  const gvisor = host === "runsc-sandbox";
  return {
    isolation: gvisor ? "gvisor" : "container",
    proven: !gvisor,
    facts: [
      `${view.engine} records the OCI runtime "${view.runtime || "its default"}"`,
      `the host process is "${host || "not readable here"}"`,
    ],
  };
}

/** Whether this runsc takes `--preserve-fds` on create (runsc 2022-12 does not), so fd 3 can reach the sandbox. */
export async function runscPassesFds(runsc: string): Promise<boolean> {
  const help = await execCli([runsc, "create", "-h"], { timeoutMs: 10_000 });
  return /-preserve-fds\b/.test(help.stdout + help.stderr);
}

function firstLine(text: string): string {
  return (text.split("\n").map((line) => line.trim()).find(Boolean) ?? "no error output").slice(0, 300);
}

/** The file `path` names, symlinks followed; `path` itself when it cannot be resolved. */
function resolvePath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
