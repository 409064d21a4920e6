/**
 * codemode's seccomp profile in real containers: rootful podman, rootless podman (through runuser) and
 * docker. Every risky syscall the probe tries fails before the kernel acts on it, the engine's own default
 * lets some of them through (so the profile is what makes the difference), and a realistic workload still
 * runs. The probe programs are in tests/testdata/oci_probes; docs/security.md has the measured table.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import process from "node:process";
import type { RuntimePlugin, SandboxLimits } from "../../core/contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../../core/sandbox/image_build.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import type { OciOptions } from "../../plugins/runtime/oci_base.ts";
import { podman } from "../../plugins/runtime/podman.ts";

const IMAGE = process.env.CODEMODE_IMAGE ?? DEFAULT_IMAGE;
const ROOTLESS_USER = process.env.CODEMODE_ROOTLESS_USER ?? "codemode-rootless";
const LIMITS: SandboxLimits = { memory: "512m", pids: 128 };
const probe = (file: string) =>
  readFileSync(new URL(`../testdata/oci_probes/${file}`, import.meta.url), "utf8");
const SYSCALLS = probe("syscalls.py");
const WORKLOAD = probe("workload.py");

/** What a call the filter stops can return: its errno, or the kill for a syscall table it does not admit. */
const REFUSED = new Set(["EPERM", "ENOSYS", "EAFNOSUPPORT", "EPROTONOSUPPORT", "killed:SIGSYS"]);

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
  seccomp_filters: string;
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

  test("every risky syscall is refused by codemode's profile, which the engine default does not all refuse", async () => {
    const [ours, theirs] = await Promise.all([
      runJson<ProbeReport>(runtime, engine.label, SYSCALLS),
      runJson<ProbeReport>(engine.make({ seccomp: "engine" }), engine.label, SYSCALLS),
    ]);
    assert.equal(ours.arch, "x86_64", "the probe knows x86_64 syscall numbers only");
    assert.equal(ours.uid, 65534);
    assert.deepEqual([ours.seccomp, ours.seccomp_filters], ["2", "1"]);
    const through = Object.entries(ours.results).filter(([, outcome]) => !REFUSED.has(outcome));
    assert.deepEqual(through, [], "calls the profile let through to the kernel");
    // The ones that matter most, with the answer the profile gives.
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
        "personality(READ_IMPLIES_EXEC)": engine.label === "docker" ? "EPERM" : "ENOSYS",
        "32-bit int 0x80": "killed:SIGSYS",
        "socket(AF_VSOCK)": "EAFNOSUPPORT",
        "netlink(NETFILTER)": "EPROTONOSUPPORT",
      })
    ) {
      assert.equal(ours.results[call], outcome, call);
    }
    const closed = Object.keys(ours.results).filter((call) => theirs.results[call] !== ours.results[call]);
    console.log(
      `${engine.label}: ${closed.length} of ${Object.keys(ours.results).length} probes answer differently ` +
        `under the engine's default profile:\n` +
        closed.map((call) => `  ${call}: ${theirs.results[call]} -> ${ours.results[call]}`).join("\n"),
    );
    const open = closed.filter((call) => theirs.results[call] === "ok");
    assert.ok(open.length > 0, "the engine default refuses everything codemode's profile refuses");
  });

  test("a realistic workload runs under codemode's profile", async () => {
    const checks = await runJson<Record<string, string>>(runtime, engine.label, WORKLOAD);
    assert.ok(Object.keys(checks).length >= 14, JSON.stringify(checks));
    const failed = Object.entries(checks).filter(([, outcome]) => outcome !== "ok");
    assert.deepEqual(failed, []);
  });
}
