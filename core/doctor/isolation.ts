/**
 * Doctor's proof of a sandbox's isolation, from two sides: what the host sees of the running probe sandbox
 * (the engine's record of its OCI runtime, and the host process behind it: runsc's sandbox under gVisor),
 * and the kernel the sandbox itself reports. A container shares the host's kernel, so its kernel release is
 * the host's; gVisor's own kernel reports another one. The host's side is what an image cannot fake.
 * Only gVisor needs proving: a container is judged only by whether the host sees runsc behind it.
 * @module
 */
import { release } from "node:os";
import type { Isolation, IsolationEvidence, Problem } from "../contracts/runtime.ts";

/** What doctor concluded about one runtime's isolation. */
export interface IsolationCheck {
  /** The isolation the runtime promises. */
  expected: Isolation;
  /** Whether the facts prove it. */
  proven: boolean;
  /** The kernel release the sandbox reports, and the host's. */
  kernel?: { sandbox: string; host: string };
  /** One line per fact; the ones that disagree start with "NOT: ". */
  facts: string[];
}

/** Python that prints one JSON line: the kernel release and version the sandbox sees. */
export const KERNEL_PROGRAM = `
try:
    import platform as _codemode_platform
    print(__import__("json").dumps({"release": _codemode_platform.release()}))
except Exception:
    print("{}")
`;

/** The kernel release in {@link KERNEL_PROGRAM}'s line, or undefined when it tells nothing. */
export function parseKernelRelease(line: string | undefined): string | undefined {
  try {
    const facts = JSON.parse(line ?? "");
    return typeof facts?.release === "string" && facts.release ? facts.release.slice(0, 200) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Judges the isolation `expected` from the host's `evidence` (absent when the runtime cannot look) and the
 * sandbox's kernel release. gVisor is proven only when the host saw runsc run it and a kernel other than
 * the host's answered inside; a container unless the host saw runsc. Pyodide has no kernel of its own to
 * show: WebAssembly in a Deno process without permissions, as its runtime says.
 */
export function judgeIsolation(
  expected: Isolation,
  evidence: IsolationEvidence | undefined,
  sandboxKernel: string | undefined,
  hostKernel: string = release(),
): IsolationCheck {
  if (expected === "wasm") {
    return { expected, proven: true, facts: ["WebAssembly (Pyodide) in a Deno process without permissions"] };
  }
  const facts = [...evidence?.facts ?? []];
  const kernel = sandboxKernel ? { sandbox: sandboxKernel, host: hostKernel } : undefined;
  const own = kernel && kernel.sandbox !== kernel.host;
  if (expected === "gvisor") {
    facts.push(
      !kernel
        ? "NOT: the sandbox reported no kernel release"
        : `${
          own ? "" : "NOT: "
        }the sandbox's kernel reports "${kernel.sandbox}", the host's "${kernel.host}"`,
    );
    const proven = Boolean(evidence?.proven && evidence.isolation === "gvisor" && own);
    return { expected, proven, ...(kernel ? { kernel } : {}), facts };
  }
  // A remote engine (podman machine, Docker Desktop) runs containers on a VM's kernel: another release
  // is no sign of gVisor there, so only the host's view of runsc speaks against a container.
  if (kernel) facts.push(`the sandbox's kernel reports "${kernel.sandbox}", the host's "${kernel.host}"`);
  const proven = evidence?.isolation !== "gvisor";
  return { expected, proven, ...(kernel ? { kernel } : {}), facts };
}

/** The problem with an isolation that was not proven, or undefined when it was. */
export function isolationProblem(check: IsolationCheck | undefined): Problem | undefined {
  if (!check || check.proven) return undefined;
  const against = check.facts.filter((fact) => fact.startsWith("NOT: ")).map((fact) => fact.slice(5));
  if (check.expected === "gvisor") {
    return {
      message: `The sandbox did not prove it runs under gVisor: ${against.join("; ") || "no facts"}`,
      fix: "Check `runsc --version` and CODEMODE_GVISOR_PLATFORM (docs/security.md#gvisor); codemode runs " +
        "no sandbox under runc while CODEMODE_ISOLATION=gvisor",
    };
  }
  return {
    message: `The sandbox does not look like a plain container: ${against.join("; ") || "no facts"}`,
    fix: "Check the engine's default OCI runtime (containers.conf, daemon.json)",
  };
}
