/**
 * Known failure texts of container engines and what to do about each, for doctor's runtime check.
 * @module
 */
import type { Problem } from "../contracts/runtime.ts";

/** Known failure texts of container engines and what to do about each. */
export const FAILURES: readonly { pattern: RegExp; problem: (name: string, text: string) => Problem }[] = [
  {
    pattern: /cgroups? in hybrid mode/i,
    problem: () => ({
      message: 'The OCI runtime crun cannot run containers here: "cgroups in hybrid mode not supported"',
      fix: 'Use runc: apt-get install runc, and set runtime = "runc" under [engine] in ' +
        "/etc/containers/containers.conf (codemode's podman plugin picks runc itself on cgroup v1 hosts)",
    }),
  },
  {
    pattern:
      /setrlimit[^\n]*(operation not permitted|permission denied)|rlimit[^\n]*operation not permitted/i,
    problem: () => ({
      message: "The sandbox's ulimits exceed this machine's hard limits (setrlimit: operation not permitted)",
      fix:
        "Lower CODEMODE_PIDS (nproc is derived from it) below `ulimit -Hu`, or raise the host's hard limits",
    }),
  },
  {
    pattern: /cgroup config|failed to write[^\n]*\/sys\/fs\/cgroup/i,
    problem: (_name, text) => {
      const controller = /\/sys\/fs\/cgroup\/(?:[^/\s]*,)?(pids|memory|cpu)/.exec(text)?.[1];
      const setting =
        { pids: "CODEMODE_PIDS", memory: "CODEMODE_MEMORY", cpu: "CODEMODE_CPUS" }[controller ?? ""];
      return {
        message: `The engine could not apply the sandbox's ${controller ?? "cgroup"} limit` +
          (setting ? ` (${setting})` : ""),
        fix: setting
          ? `Lower ${setting}, or unset it to use the default`
          : "Lower CODEMODE_PIDS, CODEMODE_MEMORY or CODEMODE_CPUS",
      };
    },
  },
  {
    pattern: /Cannot use the seccomp profile "[^"]*" \([^)]*\)/,
    problem: (_name, text) => ({
      message: /Cannot use the seccomp profile "[^"]*" \([^)]*\)/.exec(text)![0],
      fix:
        `Set CODEMODE_SECCOMP to a readable JSON profile, "engine" for the engine's default, or unset it ` +
        `for codemode's`,
    }),
  },
  {
    pattern: /opening seccomp profile failed[^\n]*no such file/i,
    problem: () => ({
      message: "The engine cannot read codemode's seccomp profile: a remote engine (podman machine) sees " +
        "another filesystem",
      fix:
        "Set CODEMODE_SECCOMP to a copy of plugins/runtime/seccomp.json at a path the engine shares (under " +
        "your home with podman machine), or to engine for the engine's default profile",
    }),
  },
  {
    pattern: /create failed:[^\n]*seccomp|seccomp profile[^\n]*(failed|invalid)/i,
    problem: (_name, text) => ({
      message: `The engine rejected the seccomp profile: "${
        (/[^\n]*seccomp[^\n]*/i.exec(text)?.[0] ?? "").trim().slice(0, 300)
      }"`,
      fix: "Fix the profile CODEMODE_SECCOMP names, or unset it to use codemode's",
    }),
  },
  {
    pattern: /for platform "[^"]*"|\/dev\/kvm/,
    problem: (_name, text) => ({
      message: `runsc cannot use its platform here: "${
        (/[^\n]*(platform|\/dev\/kvm)[^\n]*/.exec(text)?.[0] ?? "")
          .trim().slice(0, 300)
      }"`,
      fix: "Set CODEMODE_GVISOR_PLATFORM=ptrace, which needs no hardware support (docs/security.md#gvisor)",
    }),
  },
  {
    pattern: /image not known|no such image|unable to find image|manifest unknown|pull access denied/i,
    problem: (name) => ({
      message: "The sandbox image is missing",
      fix: `Build it: codemode image build --runtime ${name}`,
    }),
  },
  {
    pattern:
      /cannot connect to the docker daemon|is the docker daemon running|containerd\.sock.*(no such|refused)/i,
    problem: (name) => ({
      message: `The ${name} daemon is not running`,
      fix: name === "docker"
        ? "Start it: systemctl start docker (without systemd: dockerd >/var/log/dockerd.log 2>&1 &)"
        : "Start containerd: systemctl start containerd",
    }),
  },
  {
    pattern: /permission denied[^\n]*\.sock/i,
    problem: (name) => ({
      message: `This user may not use the ${name} daemon socket`,
      fix: `Add the user to the ${name} group (usermod -aG ${name} "$USER") and log in again`,
    }),
  },
  {
    pattern: /executable file not found in \$path|python3: not found|no such file or directory: .*python3/i,
    problem: () => ({
      message: "The sandbox image has no python3",
      fix: "Use an image with python3 (CODEMODE_IMAGE) or build the default: codemode image build",
    }),
  },
  {
    pattern: /out of memory|\boom(killed)?\b|cannot allocate memory/i,
    problem: () => ({
      message: "The sandbox ran out of memory while starting",
      fix: "Raise CODEMODE_MEMORY (e.g. 1g)",
    }),
  },
];

/** The problem a failure text shows, with its fix; a generic one when the text is not recognised. */
export function explainFailure(runtime: string, text: string): Problem {
  const known = FAILURES.find((f) => f.pattern.test(text));
  if (known) return known.problem(runtime, text);
  // The session's wrapper ("Sandbox "x" failed to start: exit code 125: ") says less than the engine.
  const engine = text.replace(/^Sandbox "[^"]*" failed to start: (exit code \d+: )?/, "");
  const line = engine.split("\n").map((l) => l.trim()).find(Boolean) ?? "no error output";
  return {
    message: `The sandbox did not start: "${line.slice(0, 400)}"`,
    fix: "Act on the engine's message, or choose another runtime with CODEMODE_RUNTIME",
  };
}
