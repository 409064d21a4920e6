import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  isolationOf,
  type RuntimeDetection,
  type RuntimePlugin,
  type SandboxStartOptions,
  servesIsolation,
} from "../../core/contracts/runtime.ts";
import { selectRuntime } from "../../core/sandbox/runtime_select.ts";
import { buildRunArgs, type OciRunConfig, runConfigFor } from "../../plugins/runtime/oci_base.ts";
import {
  containerEvidence,
  diagnoseGvisor,
  dockerRuntimeProblem,
  findRunsc,
  gvisorEngineProblem,
  gvisorEvidence,
  gvisorHostPids,
  gvisorRunArgs,
  gvisorRuntimeFor,
  resolveGvisor,
  runscFlags,
} from "../../plugins/runtime/gvisor.ts";
import { ProblemError } from "../../plugins/runtime/_oci_exec.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import { nerdctl } from "../../plugins/runtime/nerdctl.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { pyodide } from "../../plugins/runtime/pyodide.ts";

const start: SandboxStartOptions = {
  name: "codemode-g1",
  image: "codemode-sandbox:latest",
  command: ["python3", "-c", "print(1)"],
  limits: { memory: "512m", pids: 64 },
  labels: { "codemode.owner-pid": "123" },
};

function valueOf(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
}

function valuesOf(args: string[], flag: string): string[] {
  return args.flatMap((arg, i) => arg === flag ? [args[i + 1]] : []);
}

const gvisorConfig = (engine: "podman" | "docker", runtime: string): OciRunConfig =>
  runConfigFor(engine, { gvisor: { platform: "ptrace" } }, start.limits, true, "/tmp/codemode-0/g.json", {
    runtime,
    channel: false,
  });

Deno.test("buildRunArgs() gives podman runsc by absolute path with its flags, in place of any runtime", () => {
  const config = { ...gvisorConfig("podman", "/usr/bin/runsc"), runtime: "runc" };
  const args = buildRunArgs(start, config);
  const at = args.indexOf("--runtime");
  assert.deepEqual(args.slice(at, at + 8), [
    "--runtime",
    "/usr/bin/runsc",
    "--runtime-flag",
    "network=none",
    "--runtime-flag",
    "platform=ptrace",
    "--runtime-flag",
    "oci-seccomp",
  ]);
  assert.equal(valuesOf(args, "--runtime").length, 1, "runc must not be named as well");
  assert.ok(!args.includes("--preserve-fds"), "runsc 2022-12 rejects --preserve-fds");
  assert.ok(valuesOf(args, "--label").includes("codemode.isolation=gvisor"));
  // The hardening stays: no network, read-only root, no capabilities, nobody, codemode's profile.
  assert.equal(valueOf(args, "--network"), "none");
  assert.ok(args.includes("--read-only"));
  assert.equal(valueOf(args, "--cap-drop"), "ALL");
  assert.equal(valueOf(args, "--user"), "65534:65534");
  assert.deepEqual(valuesOf(args, "--security-opt"), ["no-new-privileges", "seccomp=/tmp/codemode-0/g.json"]);
  assert.equal(valueOf(args, "--memory"), "512m");
  // The pids cgroup holds runsc's own tasks; the sandbox's tasks are capped by RLIMIT_NPROC in gVisor.
  assert.equal(valueOf(args, "--pids-limit"), String(gvisorHostPids(64)));
  assert.ok(valuesOf(args, "--ulimit").includes("nproc=64:64"));
});

Deno.test("buildRunArgs() gives docker the runtime name its daemon config maps to runsc", () => {
  const args = buildRunArgs(start, gvisorConfig("docker", "codemode-gvisor"));
  assert.deepEqual(valuesOf(args, "--runtime"), ["codemode-gvisor"]);
  assert.ok(!args.includes("--runtime-flag"), "docker has no --runtime-flag");
  assert.ok(valuesOf(args, "--label").includes("codemode.isolation=gvisor"));
});

Deno.test("a container sandbox keeps its runtime, channel and pids cap, and no isolation label", () => {
  const config = runConfigFor("podman", { runtime: "runc" }, start.limits, true);
  const args = buildRunArgs(start, config);
  assert.deepEqual(valuesOf(args, "--runtime"), ["runc"]);
  assert.ok(args.includes("--preserve-fds"));
  assert.equal(valueOf(args, "--pids-limit"), "64");
  assert.ok(!valuesOf(args, "--label").some((label) => label.startsWith("codemode.isolation")));
});

Deno.test("runConfigFor() passes the channel fd under gVisor only where that runsc takes --preserve-fds", () => {
  const withFds = runConfigFor("podman", {}, start.limits, true, undefined, { runtime: "/r", channel: true });
  const without = runConfigFor("podman", {}, start.limits, true, undefined, {
    runtime: "/r",
    channel: false,
  });
  assert.equal(withFds.channel, true);
  assert.equal(without.channel, false);
  assert.equal(without.gvisor?.platform, "ptrace", "the default platform");
});

Deno.test("nerdctl refuses gVisor rather than drop runsc's flags; podman and docker take it", () => {
  assert.match(gvisorEngineProblem("nerdctl")!.message, /--oci-seccomp/);
  assert.equal(gvisorEngineProblem("podman"), undefined);
  assert.equal(gvisorEngineProblem("docker"), undefined);
  assert.throws(() => gvisorRunArgs("nerdctl", "/usr/bin/runsc", "ptrace"), /nerdctl cannot/);
  assert.deepEqual(runscFlags("kvm"), ["network=none", "platform=kvm", "oci-seccomp"]);
});

Deno.test("findRunsc() finds runsc on PATH by absolute path, and names the install command when it is not there", () => {
  const dir = mkdtempSync(join(tmpdir(), "cm-runsc-"));
  const runsc = join(dir, "runsc");
  writeFileSync(runsc, "#!/bin/sh\n");
  chmodSync(runsc, 0o755);
  assert.deepEqual(findRunsc("runsc", `/nonexistent:${dir}`), { path: runsc });
  assert.deepEqual(findRunsc(runsc, ""), { path: runsc });
  const missing = findRunsc("runsc", "/nonexistent");
  assert.match(missing.problem!.message, /runsc is not installed/);
  assert.match(missing.problem!.fix!, /apt-get install runsc/);
  chmodSync(runsc, 0o644);
  assert.match(findRunsc(runsc, "").problem!.message, /not an executable file/);
});

Deno.test("dockerRuntimeProblem() accepts only runsc itself with codemode's flags", () => {
  const flags = ["--network=none", "--platform=ptrace", "--oci-seccomp"];
  const ok = { "codemode-gvisor": { path: "/usr/bin/runsc", runtimeArgs: flags } };
  assert.equal(dockerRuntimeProblem(ok, "codemode-gvisor", "/usr/bin/runsc", "ptrace"), undefined);
  const absent = dockerRuntimeProblem(
    { runc: { path: "runc" } },
    "codemode-gvisor",
    "/usr/bin/runsc",
    "ptrace",
  );
  assert.match(absent!.message, /no OCI runtime "codemode-gvisor"/);
  assert.match(absent!.fix!, /daemon\.json/);
  assert.match(absent!.fix!, /"--oci-seccomp"/);
  const elsewhere = { "codemode-gvisor": { path: "/opt/old/runsc", runtimeArgs: flags } };
  assert.match(
    dockerRuntimeProblem(elsewhere, "codemode-gvisor", "/usr/bin/runsc", "ptrace")!.message,
    /old/,
  );
  const bare = { "codemode-gvisor": { path: "/usr/bin/runsc", runtimeArgs: ["--network=none"] } };
  assert.match(
    dockerRuntimeProblem(bare, "codemode-gvisor", "/usr/bin/runsc", "ptrace")!.message,
    /lacks --platform=ptrace, lacks --oci-seccomp/,
  );
  assert.match(
    dockerRuntimeProblem(ok, "codemode-gvisor", "/usr/bin/runsc", "kvm")!.message,
    /lacks --platform=kvm, also has --platform=ptrace/,
  );
  const both = { "codemode-gvisor": { path: "/usr/bin/runsc", runtimeArgs: [...flags, "--network=host"] } };
  assert.match(
    dockerRuntimeProblem(both, "codemode-gvisor", "/usr/bin/runsc", "ptrace")!.message,
    /also has --network=host/,
  );
  // A symlink to runsc is runsc.
  const dir = mkdtempSync(join(tmpdir(), "cm-runsc-"));
  writeFileSync(join(dir, "runsc"), "");
  symlinkSync(join(dir, "runsc"), join(dir, "link"));
  const linked = { "codemode-gvisor": { path: join(dir, "link"), runtimeArgs: flags } };
  const real = (path: string) => path.replace(/link$/, "runsc");
  assert.equal(
    dockerRuntimeProblem(linked, "codemode-gvisor", join(dir, "runsc"), "ptrace", real),
    undefined,
  );
});

Deno.test("diagnoseGvisor() turns runsc failures into fixes, and leaves other failures alone", () => {
  assert.match(
    diagnoseGvisor("Error: creating container: cannot open /dev/kvm: no such file", "kvm")!.fix!,
    /CODEMODE_GVISOR_PLATFORM=ptrace/,
  );
  // As runsc 2022-12 says it where there is no /dev/kvm; a platform that hangs times the probe out.
  const kvm =
    "Error: /usr/bin/runsc: creating container: cannot create sandbox: cannot create sandbox process: " +
    'opening device file for platform "kvm": error opening KVM device file (/dev/kvm): open /dev/kvm: no such file';
  assert.match(diagnoseGvisor(kvm, "kvm")!.message, /cannot use the "kvm" platform/);
  assert.match(
    diagnoseGvisor("podman: Timed out after 30000 ms", "kvm")!.fix!,
    /CODEMODE_GVISOR_PLATFORM=ptrace/,
  );
  assert.match(diagnoseGvisor('Rootless mode not supported with "create"', "ptrace")!.fix!, /rootful/);
  assert.match(
    diagnoseGvisor(
      "docker: Error response from daemon: unknown or invalid runtime name: codemode-gvisor",
      "ptrace",
    )!
      .fix!,
    /Register runsc/,
  );
  assert.match(diagnoseGvisor("/usr/bin/runsc: boot failed", "ptrace")!.message, /runsc failed/);
  assert.equal(diagnoseGvisor("image not known", "ptrace"), undefined);
});

Deno.test("gvisorEvidence() proves gVisor only when the engine, the host process and runsc's flags all agree", () => {
  const cmdline =
    ["runsc-sandbox", "--root=/var/run/runsc", "--network=none", "--oci-seccomp=true", "boot", "id"]
      .join("\0") + "\0";
  const view = { engine: "podman" as const, runtime: "/usr/bin/runsc", cmdline };
  const expected = { runtime: "/usr/bin/runsc", platform: "ptrace" };
  const proven = gvisorEvidence(view, expected);
  assert.equal(proven.proven, true, proven.facts.join("\n"));
  assert.equal(proven.isolation, "gvisor");
  assert.ok(!proven.facts.some((fact) => fact.startsWith("NOT: ")));
  const failing = (changed: Partial<typeof view>, platform = "ptrace") =>
    gvisorEvidence({ ...view, ...changed }, { ...expected, platform }).facts.filter((f) =>
      f.startsWith("NOT: ")
    );
  assert.equal(failing({ runtime: "runc" }).length, 1);
  assert.ok(failing({ cmdline: "python3\0-c\0pass\0" }).length >= 3, "runc's process is no runsc sandbox");
  assert.equal(failing({ cmdline: cmdline.replace("--oci-seccomp=true\0", "") }).length, 1);
  assert.equal(failing({ cmdline: cmdline.replace("--network=none\0", "") }).length, 1);
  assert.equal(failing({ cmdline: cmdline.replace("boot", "--platform=kvm\0boot") }).length, 1);
  assert.equal(failing({ cmdline: cmdline.replace("boot", "--platform=kvm\0boot") }, "kvm").length, 0);
  assert.equal(failing({ cmdline: "" }).length, 3, "a gone process proves nothing");
  // A container is one only while the host sees no runsc behind it.
  assert.equal(containerEvidence({ ...view, runtime: "runc", cmdline: "catatonit\0" }).proven, true);
  assert.equal(containerEvidence(view).isolation, "gvisor");
});

Deno.test("the plugins say which isolation their sandboxes get, and runtimes serve the setting that matches", () => {
  const gvisor = podman({ isolation: "gvisor" });
  assert.equal(gvisor.isolation, "gvisor");
  assert.equal(podman().isolation, "container");
  assert.equal(docker({ isolation: "gvisor" }).isolation, "gvisor");
  assert.equal(nerdctl({ isolation: "gvisor" }).isolation, "gvisor");
  assert.equal(pyodide({ stateDir: tmpdir() }).isolation, "wasm");
  assert.equal(isolationOf({}), "container");
  assert.equal(servesIsolation(gvisor, "gvisor"), true);
  assert.equal(servesIsolation(podman(), "gvisor"), false);
  assert.equal(servesIsolation(pyodide({ stateDir: tmpdir() }), "gvisor"), false);
  assert.equal(servesIsolation(pyodide({ stateDir: tmpdir() }), "container"), true);
  assert.equal(servesIsolation(gvisor, "container"), false);
});

/** A runtime with a fixed verdict that records whether it was asked. */
function fake(name: string, isolation: RuntimePlugin["isolation"], available: boolean) {
  const asked: string[] = [];
  const runtime: RuntimePlugin = {
    name,
    isolation,
    detect: (): Promise<RuntimeDetection> => {
      asked.push(name);
      return Promise.resolve({
        name,
        available,
        problems: available ? [] : [{ message: `${name} is broken`, fix: `fix ${name}` }],
      });
    },
    start: () => Promise.reject(new Error("not in this test")),
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
  };
  return { runtime, asked };
}

Deno.test("selectRuntime() under gvisor tries only gVisor runtimes and never falls back to runc or Pyodide", async () => {
  const broken = fake("podman", "gvisor", false);
  const runc = fake("docker", "container", true);
  const wasm = fake("pyodide", "wasm", true);
  await assert.rejects(
    selectRuntime("auto", [broken.runtime, runc.runtime, wasm.runtime], undefined, "gvisor"),
    /No sandbox runtime is usable under gVisor \(CODEMODE_ISOLATION=gvisor; no fallback to runc\) \(podman: podman is broken \(fix: fix podman\)\)/,
  );
  assert.deepEqual([runc.asked, wasm.asked], [[], []], "nothing else was even detected");
  await assert.rejects(
    selectRuntime("pyodide", [broken.runtime, wasm.runtime], undefined, "gvisor"),
    /The pyodide runtime runs wasm sandboxes, not gvisor ones/,
  );
  const works = fake("podman", "gvisor", true);
  assert.equal(
    (await selectRuntime("auto", [wasm.runtime, works.runtime], undefined, "gvisor")).runtime.name,
    "podman",
  );
  // The default setting leaves gVisor runtimes out and keeps the old order.
  assert.equal((await selectRuntime("auto", [works.runtime, wasm.runtime])).runtime.name, "pyodide");
  await assert.rejects(
    selectRuntime("auto", [wasm.runtime], undefined, "gvisor"),
    /No registered runtime runs gvisor/,
  );
});

Deno.test("the runsc profile is codemode's with clone3 allowed and gVisor's name for pselect6", async () => {
  const { GVISOR_SECCOMP_PROFILE, SECCOMP_PROFILE, seccompProfilePath } = await import(
    "../../plugins/runtime/seccomp.ts"
  );
  type Rule = { names: string[]; action: string; errnoRet?: number };
  const base = JSON.parse(SECCOMP_PROFILE) as { syscalls: Rule[] };
  const gvisor = JSON.parse(GVISOR_SECCOMP_PROFILE) as { syscalls: Rule[] };
  assert.equal(gvisor.syscalls.length, base.syscalls.length);
  const rulesOf = (profile: { syscalls: Rule[] }, name: string) =>
    profile.syscalls.filter((rule) => rule.names.includes(name)).map((rule) => rule.action);
  assert.deepEqual(rulesOf(base, "clone3"), ["SCMP_ACT_ERRNO"]);
  assert.deepEqual(rulesOf(gvisor, "clone3"), ["SCMP_ACT_ALLOW"]);
  assert.deepEqual(rulesOf(gvisor, "pselect"), ["SCMP_ACT_ALLOW"]);
  assert.deepEqual(rulesOf(gvisor, "pselect6"), ["SCMP_ACT_ALLOW"]);
  // Every refusal but clone3's is kept as it is.
  const refusals = (profile: { syscalls: Rule[] }) =>
    JSON.stringify(
      profile.syscalls.filter((r) => r.action !== "SCMP_ACT_ALLOW" && !r.names.includes("clone3")),
    );
  assert.equal(refusals(gvisor), refusals(base));
  for (const name of ["unshare", "mount", "bpf", "io_uring_setup", "keyctl", "ptrace", "seccomp"]) {
    assert.deepEqual(rulesOf(gvisor, name), ["SCMP_ACT_ERRNO"], name);
  }
  const dir = mkdtempSync(join(tmpdir(), "cm-seccomp-"));
  const path = await seccompProfilePath("codemode", dir, { gvisor: true });
  assert.match(path!, /seccomp-gvisor-[0-9a-f]{16}\.json$/);
  assert.equal(readFileSync(path!, "utf8"), GVISOR_SECCOMP_PROFILE);
  assert.notEqual(await seccompProfilePath("codemode", dir), path);
});

Deno.test("gvisorRuntimeFor() gives each engine its runtime, or throws the finding that stops the start", () => {
  const dir = mkdtempSync(join(tmpdir(), "cm-runsc-"));
  const runsc = join(dir, "runsc");
  writeFileSync(runsc, "#!/bin/sh\n");
  chmodSync(runsc, 0o755);
  const gvisor = resolveGvisor({ runsc });
  const limits = { cgroupLimits: true };
  assert.deepEqual(gvisorRuntimeFor("podman", gvisor, limits, false), { runtime: runsc, channel: false });
  assert.deepEqual(gvisorRuntimeFor("podman", gvisor, limits, true), { runtime: runsc, channel: true });
  const flags = ["--network=none", "--platform=ptrace", "--oci-seccomp"];
  const registered = {
    cgroupLimits: true,
    runtimes: { "codemode-gvisor": { path: runsc, runtimeArgs: flags } },
  };
  assert.deepEqual(gvisorRuntimeFor("docker", gvisor, registered, true), {
    runtime: "codemode-gvisor",
    channel: false,
  });
  const unregistered = { cgroupLimits: true, runtimes: { runc: { path: "runc" } } };
  assert.throws(
    () => gvisorRuntimeFor("docker", gvisor, unregistered, false),
    /no OCI runtime "codemode-gvisor"/,
  );
  assert.throws(() => gvisorRuntimeFor("nerdctl", gvisor, limits, false), /nerdctl cannot run sandboxes/);
  // Rootless on cgroup v1: runsc would skip the cgroups and nothing would cap memory.
  assert.throws(
    () => gvisorRuntimeFor("podman", gvisor, { cgroupLimits: false }, false),
    (error: Error) =>
      error instanceof ProblemError && /cannot cap a gVisor sandbox's memory/.test(error.message),
  );
  assert.throws(
    () => gvisorRuntimeFor("podman", resolveGvisor({ runsc: join(dir, "gone") }), limits, false),
    /not an executable file/,
  );
});
