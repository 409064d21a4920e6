/**
 * Doctor's runtime check: detection (always afresh, never from the detection cache), the sandbox image,
 * and a real sandbox started through the plugin with the full security flag set and the configured
 * limits, running a short program over the protocol that prints `ok`, what the sandbox's seccomp
 * filter lets through and the kernel it sees, while the host looks at it from outside to prove its
 * isolation (isolation.ts). Failures are explained with one fix each. Data only; the CLI prints it.
 * @module
 */
import type {
  IsolationEvidence,
  Problem,
  RuntimeDetection,
  RuntimePlugin,
  SandboxLimits,
} from "../contracts/runtime.ts";
import { hasImageStore, IMAGE_VERSION_LABEL, isolationOf } from "../contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../sandbox/image_build.ts";
import type { HostFrame } from "../sandbox/protocol.ts";
import { RpcError } from "../host_api/rpc.ts";
import { SandboxSession } from "../sandbox/session.ts";
import { ownerLabels } from "../sandbox/session_manager.ts";

import type { CheckStatus } from "./finding.ts";
import { type Libraries, LIBRARIES_PROGRAM, parseLibraries } from "./libraries.ts";
import {
  type IsolationCheck,
  isolationProblem,
  judgeIsolation,
  KERNEL_PROGRAM,
  parseKernelRelease,
} from "./isolation.ts";

import { explainFailure } from "./failures.ts";

export type { CheckStatus } from "./finding.ts";
export { explainFailure, FAILURES } from "./failures.ts";

/** The seccomp filter a sandbox runs under, seen from inside it. */
export interface SeccompProbe {
  /** From /proc/self/status: "filter" (a filter is installed), "strict" or "disabled" (none). */
  mode: "filter" | "strict" | "disabled";
  /** Number of filters stacked on the sandbox process. */
  filters?: number;
  /** What `seccomp(SECCOMP_GET_ACTION_AVAIL)` returned: "ok" under podman's and docker's default
   * profiles, "EPERM" under codemode's, which refuses it. */
  probe?: string;
  /** Whether codemode's profile (or one as strict about the probed call) is in force. */
  codemode: boolean;
}

/** What starting a real sandbox showed. */
export interface SandboxProbe {
  ok: boolean;
  /** Milliseconds from start until the sandbox said it was ready. */
  startMs?: number;
  /** Milliseconds the `print('ok')` run took. */
  runMs?: number;
  python?: string;
  /** Undefined where the sandbox has no /proc to tell (Pyodide). */
  seccomp?: SeccompProbe;
  /** The data-science libraries the sandbox has (null for each one it lacks). */
  libraries?: Libraries;
  /** The kernel release the sandbox reports. */
  kernel?: string;
  /** What the host saw of the running sandbox, when the runtime can look. */
  host?: IsolationEvidence;
  error?: string;
}

/** Everything doctor found out about one runtime plugin. */
export interface RuntimeCheck {
  name: string;
  status: CheckStatus;
  installed: boolean;
  version?: string;
  rootless?: boolean;
  /** Container runtimes only: whether the sandbox image is present. */
  image?: {
    ref: string;
    present: boolean;
    /** The codemode version that built it (its label), when it says. */
    builtBy?: string;
  };
  /** Undefined when the runtime is not installed or has no image to start from. */
  sandbox?: SandboxProbe;
  /** The isolation the runtime promises, and whether the probe sandbox proved it. */
  isolation?: IsolationCheck;
  /** Set when CODEMODE_ISOLATION rules this runtime out: it was not checked. */
  notUsed?: true;
  problems: Problem[];
}

/** What the sandbox check needs besides the plugin. */
export interface RuntimeCheckOptions {
  image: string;
  limits: SandboxLimits;
  /** The bootstrap command run inside the sandbox, and its first frame. */
  command: string[];
  bootstrap: () => HostFrame;
  maxOutput: number;
  /** Generous by default: Pyodide's first start also makes its start-up snapshot. */
  startTimeoutMs?: number;
  /** Hears each fresh verdict (the CLI records it in the detection cache). */
  detected?: (plugin: RuntimePlugin, detection: RuntimeDetection) => Promise<void>;
  /** This codemode's version: an image another version built gets a warning. */
  version?: string;
}

/**
 * A warning when image `ref` was built by another codemode version than `version` (images built before
 * codemode labelled them say nothing, and neither do pulled ones).
 */
export function imageVersionProblem(
  runtime: string,
  ref: string,
  builtBy: string | undefined,
  version: string | undefined,
): Problem | undefined {
  if (!builtBy || !version || builtBy === version) return undefined;
  const tag = ref === DEFAULT_IMAGE ? "" : ` --tag ${ref}`;
  return {
    message: `The sandbox image "${ref}" was built by codemode ${builtBy}; this is codemode ${version}`,
    fix: `Rebuild it so the sandbox matches this version: codemode image build --runtime ${runtime}${tag}`,
  };
}

/** Checks one runtime: detection, image, and a real sandbox. Never throws. */
export async function checkRuntime(
  plugin: RuntimePlugin,
  options: RuntimeCheckOptions,
): Promise<RuntimeCheck> {
  const detection = await plugin.detect().catch((error) => ({
    name: plugin.name,
    available: false,
    problems: [{ message: `Detection failed: ${(error as Error).message ?? error}` }],
  } as Awaited<ReturnType<RuntimePlugin["detect"]>>));
  await options.detected?.(plugin, detection).catch(() => {});
  const installed = detection.available || detection.version !== undefined;
  const check: RuntimeCheck = {
    name: plugin.name,
    status: "ok",
    installed,
    ...(detection.version ? { version: detection.version } : {}),
    ...(detection.rootless !== undefined ? { rootless: detection.rootless } : {}),
    problems: [],
  };
  if (!installed) {
    check.status = "info";
    check.problems = detection.problems.length
      ? detection.problems
      : [{ message: `${plugin.name} is not installed` }];
    return check;
  }
  if (hasImageStore(plugin)) {
    const present = await plugin.imageExists(options.image).catch(() => false);
    check.image = { ref: options.image, present };
    if (!present) {
      check.status = "fail";
      check.problems.push({
        message: `The sandbox image "${options.image}" is missing`,
        fix: `Build it: codemode image build --runtime ${plugin.name}`,
      });
      return check;
    }
    const builtBy = await plugin.imageLabels?.(options.image).then(
      (labels) => labels[IMAGE_VERSION_LABEL],
      () => undefined,
    );
    if (builtBy) check.image.builtBy = builtBy;
    const stale = imageVersionProblem(plugin.name, options.image, builtBy, options.version);
    if (stale) check.problems.push(stale);
  }
  check.sandbox = await probeSandbox(plugin, options);
  if (!check.sandbox.ok) {
    check.status = "fail";
    const error = check.sandbox.error ?? "";
    // A start the plugin refused for a reason detection already named (runsc missing) says it once.
    const named = detection.problems.find((p) => error.includes(p.message));
    check.problems.push(named ?? explainFailure(plugin.name, error));
  } else {
    check.isolation = judgeIsolation(isolationOf(plugin), check.sandbox.host, check.sandbox.kernel);
    const unproven = isolationProblem(check.isolation);
    if (unproven) {
      check.problems.push(unproven);
      // A gVisor runtime that cannot show gVisor is broken; a container that shows runsc only odd.
      check.status = check.isolation.expected === "gvisor" ? "fail" : "warn";
    }
  }
  if (check.status === "ok" && check.problems.length) check.status = "warn";
  const seccomp = hasImageStore(plugin) ? seccompProblem(check.sandbox.seccomp) : undefined;
  if (seccomp) {
    check.problems.push(seccomp);
    if (check.status === "ok") check.status = "warn";
  }
  // Detection's own findings (e.g. limits that cannot be applied) are warnings once a sandbox ran.
  for (const problem of detection.problems) {
    if (check.problems.some((p) => p.message === problem.message)) continue;
    if (check.sandbox.ok && /image .*missing/i.test(problem.message)) continue;
    check.problems.push(problem);
    if (check.status === "ok") check.status = "warn";
  }
  return check;
}

/**
 * The program doctor runs in the sandbox: `ok`, one JSON line of seccomp facts, one of the
 * data-science libraries the image has (see libraries.ts), then one of the kernel it sees (isolation.ts). The probed call is
 * one both engines' default profiles allow and codemode's refuses, so EPERM proves codemode's profile is
 * in force, not just some filter; it changes nothing. Where /proc or ctypes is missing (Pyodide) the facts
 * are partial or empty.
 */
export const PROBE_PROGRAM = `
def _codemode_seccomp():
    import ctypes, errno, platform
    facts = {}
    try:
        lines = open("/proc/self/status").read().splitlines()
        status = dict(line.split(":", 1) for line in lines if ":" in line)
        facts["mode"], facts["filters"] = status["Seccomp"].strip(), status.get("Seccomp_filters", "").strip()
    except (OSError, KeyError):
        return facts
    nr = {"x86_64": 317, "aarch64": 277}.get(platform.machine())  # seccomp(2)
    if nr is None:
        return facts
    libc = ctypes.CDLL(None, use_errno=True)
    allow = ctypes.c_uint32(0x7FFF0000)  # SECCOMP_GET_ACTION_AVAIL of SECCOMP_RET_ALLOW
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), ctypes.c_long(2), ctypes.c_long(0), ctypes.byref(allow))
    facts["probe"] = "ok" if result == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return facts
print("ok")
try:
    print(__import__("json").dumps(_codemode_seccomp()))
except Exception:
    print("{}")
${LIBRARIES_PROGRAM}${KERNEL_PROGRAM}`;

/** Reads the seccomp facts line of {@link PROBE_PROGRAM}'s output; undefined when it tells nothing. */
export function parseSeccompFacts(line: string | undefined): SeccompProbe | undefined {
  let facts: { mode?: string; filters?: string; probe?: string };
  try {
    facts = JSON.parse(line ?? "");
  } catch {
    return undefined;
  }
  const mode = ({ "0": "disabled", "1": "strict", "2": "filter" } as const)[facts?.mode as "0" | "1" | "2"];
  if (!mode) return undefined;
  const filters = Number(facts.filters);
  return {
    mode,
    ...(facts.filters && Number.isInteger(filters) ? { filters } : {}),
    ...(facts.probe ? { probe: facts.probe } : {}),
    codemode: mode === "filter" && facts.probe === "EPERM",
  };
}

/** The problem with a container sandbox's seccomp state, if any: it should run under codemode's profile. */
export function seccompProblem(seccomp: SeccompProbe | undefined): Problem | undefined {
  if (!seccomp || seccomp.codemode) return undefined;
  if (seccomp.mode === "disabled") {
    return {
      message: "The sandbox runs without any seccomp filter",
      fix: "Unset CODEMODE_SECCOMP (or set it to codemode) and check that the engine supports seccomp",
    };
  }
  return {
    message: `A seccomp filter other than codemode's is in force (seccomp(2) returned "${
      seccomp.probe ?? "nothing"
    }", codemode's profile refuses it)`,
    fix: "Expected with CODEMODE_SECCOMP=engine or a custom profile; unset it to use codemode's " +
      "(docs/security.md)",
  };
}

/** Starts a real sandbox through the plugin, runs {@link PROBE_PROGRAM}, and removes it. Never throws. */
export async function probeSandbox(
  plugin: RuntimePlugin,
  options: RuntimeCheckOptions,
): Promise<SandboxProbe> {
  const name = `codemode-doctor-${process.pid}-${plugin.name}`;
  const session = new SandboxSession({
    runtime: plugin,
    sandbox: {
      name,
      image: options.image,
      command: options.command,
      limits: options.limits,
      labels: ownerLabels("doctor"),
    },
    bootstrap: options.bootstrap(),
    rpc: () => Promise.reject(new RpcError("RuntimeError", "doctor's sandbox check serves no calls")),
    maxOutput: options.maxOutput,
    startTimeoutMs: options.startTimeoutMs ?? 120_000,
    graceMs: 1000,
  });
  let started = performance.now();
  try {
    await session.start();
    const startMs = Math.round(performance.now() - started);
    started = performance.now();
    const [result, host] = await Promise.all([
      session.execute(PROBE_PROGRAM, { timeout: 15 }),
      // From the host, while the sandbox runs: the engine's record and the process behind it.
      plugin.inspectIsolation?.(name).catch(() => undefined),
    ]);
    const runMs = Math.round(performance.now() - started);
    const [first, facts, found, kernelLine] = result.stdout.split("\n");
    const ok = result.status === "ok" && first.trim() === "ok";
    const seccomp = parseSeccompFacts(facts);
    const libraries = parseLibraries(found);
    const kernel = parseKernelRelease(kernelLine);
    return {
      ok,
      startMs,
      runMs,
      python: session.python,
      ...(seccomp ? { seccomp } : {}),
      ...(libraries ? { libraries } : {}),
      ...(kernel ? { kernel } : {}),
      ...(host ? { host } : {}),
      ...(ok ? {} : { error: result.error || `unexpected output: "${result.stdout.slice(0, 200)}"` }),
    };
  } catch (error) {
    return { ok: false, error: (error as Error).message ?? String(error) };
  } finally {
    await session.close().catch(() => {});
  }
}
