import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { release, tmpdir } from "node:os";
import { join } from "node:path";
import type {
  ImageStore,
  IsolationEvidence,
  RuntimePlugin,
  SandboxProcess,
} from "../../core/contracts/runtime.ts";
import type { HostFrame } from "../../core/sandbox/protocol.ts";
import { isolationProblem, judgeIsolation, parseKernelRelease } from "../../core/doctor/isolation.ts";
import { chooseRuntime, runDoctor } from "../../core/doctor/checks.ts";
import { explainFailure } from "../../core/doctor/runtime.ts";
import { renderReport } from "../../cli/doctor.ts";
import { colors } from "../../cli/_render.ts";
import { fakeSandboxProcess } from "./_fake_runtime.ts";

const runsc: IsolationEvidence = {
  isolation: "gvisor",
  proven: true,
  facts: ['podman records the OCI runtime "/usr/bin/runsc"', 'the host process is "runsc-sandbox"'],
};

Deno.test("judgeIsolation() proves gVisor only from the host's view and a kernel other than the host's", () => {
  const proven = judgeIsolation("gvisor", runsc, "4.4.0", "6.1.0");
  assert.equal(proven.proven, true);
  assert.deepEqual(proven.kernel, { sandbox: "4.4.0", host: "6.1.0" });
  assert.equal(isolationProblem(proven), undefined);
  // The host's kernel answering inside: runc, whatever the image claims.
  const shared = judgeIsolation("gvisor", runsc, "6.1.0", "6.1.0");
  assert.equal(shared.proven, false);
  assert.match(isolationProblem(shared)!.message, /did not prove it runs under gVisor: the sandbox's kernel/);
  // An image can fake its kernel release; it cannot make the engine record runsc.
  assert.equal(judgeIsolation("gvisor", undefined, "4.4.0", "6.1.0").proven, false);
  assert.equal(judgeIsolation("gvisor", { ...runsc, proven: false }, "4.4.0", "6.1.0").proven, false);
  assert.equal(judgeIsolation("gvisor", runsc, undefined, "6.1.0").proven, false);
  assert.match(isolationProblem(judgeIsolation("gvisor", runsc, undefined))!.fix!, /runsc --version/);
});

Deno.test("judgeIsolation() takes a container for one unless the host sees runsc; Pyodide needs no proof", () => {
  assert.equal(judgeIsolation("container", undefined, release()).proven, true);
  // podman machine: another kernel (a VM's) is no sign of gVisor.
  assert.equal(judgeIsolation("container", { ...runsc, isolation: "container" }, "5.0", "23.1").proven, true);
  const odd = judgeIsolation("container", runsc, "4.4.0");
  assert.equal(odd.proven, false);
  assert.match(isolationProblem(odd)!.message, /does not look like a plain container/);
  assert.equal(judgeIsolation("wasm", undefined, undefined).proven, true);
});

Deno.test("parseKernelRelease() reads the probe's kernel line and ignores anything else", () => {
  assert.equal(parseKernelRelease('{"release": "4.4.0"}'), "4.4.0");
  assert.equal(parseKernelRelease("{}"), undefined);
  assert.equal(parseKernelRelease("not json"), undefined);
  assert.equal(parseKernelRelease('{"release": 4}'), undefined);
  assert.equal(parseKernelRelease(undefined), undefined);
});

/** A sandbox that answers doctor's probe as a sandbox on `kernel` would. */
function probeAnswering(kernel: string): SandboxProcess {
  return fakeSandboxProcess({
    python: "3.11.2",
    onExecute: (frame, send) => {
      const facts = '{"mode": "2", "filters": "1", "probe": "EPERM"}';
      const data = `ok\n${facts}\n{}\n${JSON.stringify({ release: kernel })}\n`;
      send({ type: "output", id: frame.id, stream: "stdout", data });
      send({ type: "done", id: frame.id, status: "ok" });
    },
  });
}

function runtime(
  name: string,
  isolation: RuntimePlugin["isolation"],
  kernel: string,
  evidence?: IsolationEvidence,
): RuntimePlugin & ImageStore & { starts: number } {
  const plugin = {
    name,
    isolation,
    starts: 0,
    detect: () => Promise.resolve({ name, available: true, version: "1.0", rootless: false, problems: [] }),
    start: () => (plugin.starts++, Promise.resolve(probeAnswering(kernel))),
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
    ...(evidence ? { inspectIsolation: () => Promise.resolve(evidence) } : {}),
    imageExists: () => Promise.resolve(true),
    importImage: () => Promise.resolve(),
    pullImage: () => Promise.resolve(),
    tagImage: () => Promise.resolve(),
  };
  return plugin;
}

const bootstrap = (): HostFrame => ({
  type: "bootstrap",
  modules: {},
  packages: [],
  main: "codemode_runtime",
  config: { max_output: 1000, servers: [] },
});

function doctor(env: Record<string, string>, runtimes: RuntimePlugin[]) {
  return runDoctor({
    version: "test",
    env: {
      HOME: mkdtempSync(join(tmpdir(), "cm-doc-")),
      CODEMODE_STATE_DIR: join(tmpdir(), "cm-state"),
      ...env,
    },
    runtimes,
    discovery: { servers: [], skipped: [], diagnostics: [], files: [] },
    sandbox: { command: ["python3"], bootstrap },
  });
}

Deno.test("doctor under CODEMODE_ISOLATION=gvisor proves it, and never starts a runtime that is not gVisor", async () => {
  const gvisor = runtime("podman", "gvisor", "4.4.0", runsc);
  const wasm = runtime("pyodide", "wasm", "3.1.45");
  const report = await doctor({ CODEMODE_ISOLATION: "gvisor" }, [gvisor, wasm]);
  assert.equal(report.ok, true, JSON.stringify(report.findings));
  assert.equal(report.runtime, "podman");
  assert.deepEqual(report.isolation.setting, "gvisor");
  assert.equal(report.isolation.proof?.proven, true);
  assert.equal(wasm.starts, 0);
  const pyodide = report.runtimes.find((r) => r.name === "pyodide")!;
  assert.equal(pyodide.notUsed, true);
  assert.match(pyodide.problems[0].message, /Not used: CODEMODE_ISOLATION=gvisor/);
  const text = renderReport(report, colors({ isTTY: false }));
  assert.match(text, /Isolation +✓ gVisor \(CODEMODE_ISOLATION=gvisor\) in podman: gvisor, proven/);
  assert.match(text, /runsc-sandbox/);
  assert.match(text, /not used/);
});

Deno.test("doctor fails a gVisor runtime whose sandbox shows the host's kernel", async () => {
  const report = await doctor({ CODEMODE_ISOLATION: "gvisor" }, [
    runtime("podman", "gvisor", release(), runsc),
  ]);
  assert.equal(report.ok, false);
  const check = report.runtimes[0];
  assert.equal(check.status, "fail");
  assert.match(check.problems[0].message, /did not prove it runs under gVisor/);
  assert.match(
    report.findings.find((f) => f.subject === "runtime")!.message,
    /No sandbox runtime works here under gVisor/,
  );
  const text = renderReport(report, colors({ isTTY: false }));
  assert.match(text, /Isolation +✗ gVisor \(CODEMODE_ISOLATION=gvisor\)\n/);
  assert.match(text, /did not prove it runs under gVisor: the sandbox's kernel reports/);
});

Deno.test("chooseRuntime() under gvisor says no runtime works under gVisor and that runc is no fallback", () => {
  const { finding } = chooseRuntime("auto", [], "CODEMODE_RUNTIME", "gvisor");
  assert.match(finding!.message, /under gVisor .*will not fall back to runc/);
});

Deno.test("a runsc platform that cannot work here is explained with the platform that always does", () => {
  const problem = explainFailure(
    "podman",
    'Sandbox "x" failed to start: exit code 127: Error: /usr/bin/runsc: creating container: cannot create ' +
      'sandbox process: opening device file for platform "kvm": error opening KVM device file (/dev/kvm)',
  );
  assert.match(problem.message, /runsc cannot use its platform here/);
  assert.match(problem.fix!, /CODEMODE_GVISOR_PLATFORM=ptrace/);
});
