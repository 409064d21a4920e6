/**
 * codemode's seccomp profile in real containers: rootful podman, rootless podman (through runuser) and
 * docker. Every risky syscall the probe tries is contained, and the verdict says by which layer: the
 * filter, a capability check or the kernel lacking the feature (see _containment.ts: kernels differ, so a
 * probe never depends on the signal one kernel sends). The layer is known exactly from a second run under
 * a marked copy of the profile. codemode's profile contains at least what the engine's own default does,
 * and a realistic workload still runs. The probe programs are in tests/testdata/oci_probes;
 * docs/security.md has the measured table.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import type { RuntimePlugin, SandboxLimits } from "../../core/contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../../core/sandbox/image_build.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import type { OciOptions } from "../../plugins/runtime/oci_base.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import {
  type Containment,
  describe,
  filterActed,
  judge,
  kernelOnlyProfile,
  markedProfile,
} from "./_containment.ts";

const IMAGE = process.env.CODEMODE_IMAGE ?? DEFAULT_IMAGE;
const ROOTLESS_USER = process.env.CODEMODE_ROOTLESS_USER ?? "codemode-rootless";
const LIMITS: SandboxLimits = { memory: "512m", pids: 128 };
const probe = (file: string) =>
  readFileSync(new URL(`../testdata/oci_probes/${file}`, import.meta.url), "utf8");
const SYSCALLS = probe("syscalls.py");
const WORKLOAD = probe("workload.py");

/** The marked and kernel-only profiles in files every engine user can read (rootless podman is another user). */
const PROFILES = (() => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-seccomp-layers-"));
  chmodSync(dir, 0o755);
  const write = (name: string, text: string) => {
    writeFileSync(join(dir, name), text, { mode: 0o644 });
    return join(dir, name);
  };
  return {
    marked: write("marked.json", markedProfile()),
    kernelOnly: write("kernel-only.json", kernelOnlyProfile()),
  };
})();

/** Each probe's verdict: its outcome under the real profile, its layer from the marked and kernel-only runs. */
function verdicts(
  real: ProbeReport,
  marked: ProbeReport,
  kernelOnly: ProbeReport,
): Record<string, Containment> {
  return Object.fromEntries(
    Object.entries(real.results).map(([call, outcome]) => [
      call,
      judge(outcome, filterActed(outcome, marked.results[call], kernelOnly.results[call])),
    ]),
  );
}

interface Engine {
  label: string;
  make: (options?: OciOptions) => RuntimePlugin;
}

const rootless = ["runuser", "-u", ROOTLESS_USER, "--", "podman"];
const ENGINES: Engine[] = [
  { label: "podman", make: (options) => podman(options) },
  { label: "rootless podman", make: (options) => podman({ command: rootless, ...options }) },
  { label: "docker", make: (options) => docker(options) },
];

interface ProbeReport {
  arch: string;
  uid: number;
  seccomp: string;
  seccomp_filters?: string;
  results: Record<string, string>;
}

/** Runs `code` as a one-shot sandbox and returns its stdout's last line, parsed. */
async function runJson<T>(runtime: RuntimePlugin, label: string, code: string): Promise<T> {
  const name = `codemode-test-seccomp-${label.replace(/\W+/g, "-")}-${randomBytes(4).toString("hex")}`;
  const sandbox = await runtime.start({
    name,
    image: IMAGE,
    command: ["python3", "-c", code],
    limits: LIMITS,
    labels: { "codemode.test": "seccomp" },
  });
  try {
    const [out, err, code] = await Promise.all([
      new Response(sandbox.stdout).text(),
      new Response(sandbox.stderr).text(),
      sandbox.exited,
    ]);
    assert.equal(code, 0, `exit ${code}: ${err}`);
    return JSON.parse(out.trim().split("\n").at(-1) ?? "");
  } finally {
    await sandbox.kill();
  }
}

for (const engine of ENGINES) {
  const runtime = engine.make();
  const detection = await runtime.detect();
  const skip = detection.available
    ? undefined
    : `${engine.label} is not usable: ${detection.problems.map((p) => p.message).join("; ")}`;
  if (skip) console.warn(`IGNORED ${engine.label} seccomp tests: ${skip}`);
  const test = (name: string, fn: () => Promise<void>) =>
    Deno.test({
      name: `${engine.label}: ${name}`,
      ignore: Boolean(skip),
      sanitizeOps: false,
      sanitizeResources: false,
      fn,
    });

  test("every risky syscall is contained, codemode's profile at least as strictly as the engine default", async () => {
    const run = (seccomp?: string) => runJson<ProbeReport>(engine.make({ seccomp }), engine.label, SYSCALLS);
    const [ours, marked, kernelOnly, theirs] = await Promise.all([
      runJson<ProbeReport>(runtime, engine.label, SYSCALLS),
      run(PROFILES.marked),
      run(PROFILES.kernelOnly),
      run("engine"),
    ]);
    assert.equal(ours.arch, "x86_64", "the probe knows x86_64 syscall numbers only");
    assert.equal(ours.uid, 65534);
    // Seccomp mode 2 (filtering). Seccomp_filters exists from Linux 5.9 on and counts nested filters too.
    assert.equal(ours.seccomp, "2");
    assert.ok(
      ours.seccomp_filters === undefined || Number(ours.seccomp_filters) >= 1,
      `Seccomp_filters: ${ours.seccomp_filters}`,
    );
    const judged = verdicts(ours, marked, kernelOnly);
    console.log(
      `${engine.label}: each probe's outcome and the layer that contained it:\n${describe(judged)}`,
    );
    const through = Object.entries(judged).filter(([, v]) => !v.contained);
    assert.deepEqual(through, [], "calls that took effect or reached the kernel unchecked");
    // The ones that matter most: where the filter is the layer, it gives its own answer. A kernel that
    // stops the call first (no IA-32 emulation, no io_uring) is a pass that the output above names.
    for (
      const [call, outcome] of Object.entries({
        "unshare(NEWUSER)": "EPERM",
        "clone(NEWUSER)": "EPERM",
        "clone3()": "ENOSYS",
        "userns+mount(tmpfs)": "EPERM",
        "io_uring_setup": "EPERM",
        "keyctl(GET_KEYRING_ID)": "EPERM",
        "bpf(MAP_CREATE)": "EPERM",
        "ptrace(TRACEME)": "EPERM",
        "process_vm_readv(self)": "EPERM",
        // The profile's default answer, ENOSYS; engines that ignore defaultErrnoRet (docker 20.10) give EPERM.
        "personality(READ_IMPLIES_EXEC)": ["ENOSYS", "EPERM"],
        "32-bit int 0x80": "killed:SIGSYS",
        "socket(AF_VSOCK)": "EAFNOSUPPORT",
        "netlink(NETFILTER)": "EPROTONOSUPPORT",
      })
    ) {
      const verdict = judged[call];
      if (verdict.layer === "seccomp") {
        assert.ok([outcome].flat().includes(verdict.outcome), `${call}: ${verdict.outcome}, not ${outcome}`);
      } else assert.ok(verdict.contained, `${call}: ${verdict.outcome}`);
    }
    // The engine's default is judged by the same rules (its layers unknown, so only "contained" counts).
    const contained = (outcome: string) => judge(outcome, false).contained;
    const looser = Object.keys(theirs.results).filter((call) =>
      contained(theirs.results[call]) && !judged[call].contained
    );
    assert.deepEqual(looser, [], "codemode's profile lets through what the engine default contains");
    const closed = Object.keys(ours.results).filter((call) => !contained(theirs.results[call]));
    console.log(
      `${engine.label}: ${closed.length} of ${
        Object.keys(ours.results).length
      } probes the engine's default ` +
        `profile does not contain, and codemode's does:\n` +
        closed.map((call) => `  ${call}: ${theirs.results[call]} -> ${ours.results[call]}`).join("\n"),
    );
  });

  test("a realistic workload runs under codemode's profile", async () => {
    const checks = await runJson<Record<string, string>>(runtime, engine.label, WORKLOAD);
    assert.ok(Object.keys(checks).length >= 14, JSON.stringify(checks));
    const failed = Object.entries(checks).filter(([, outcome]) => outcome !== "ok");
    assert.deepEqual(failed, []);
  });
}
