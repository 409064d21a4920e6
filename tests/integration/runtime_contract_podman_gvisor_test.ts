/**
 * The runtime contract suite against rootful podman with every sandbox under gVisor (runsc), then what only
 * gVisor shows: the host sees runsc behind the sandbox, the sandbox sees gVisor's kernel, and the workloads
 * the runsc-adapted seccomp profile exists for (threads, select) work.
 */
import assert from "node:assert/strict";
import { release } from "node:os";
import { podman } from "../../plugins/runtime/podman.ts";
import { findRunsc } from "../../plugins/runtime/gvisor.ts";
import { runtimeContract } from "./_runtime_contract.ts";
import { assertNoLeftovers, ownSandboxes, sessions, TEST_IMAGE } from "./_harness.ts";

const runtime = podman({ isolation: "gvisor" });
const detection = await runtime.detect();
const skip = findRunsc().problem
  ? `runsc is not installed (scripts/setup.sh installs it)`
  : !detection.available
  ? `podman under gVisor is not usable: ${detection.problems[0]?.message}`
  : !(await runtime.imageExists(TEST_IMAGE))
  ? `image ${TEST_IMAGE} is missing (codemode image build --runtime podman)`
  : undefined;
runtimeContract("podman gvisor", () => runtime, skip);

Deno.test({
  name: "podman gvisor: the host sees runsc behind the sandbox and the sandbox sees gVisor's kernel",
  ignore: Boolean(skip),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    assert.equal(runtime.isolation, "gvisor");
    const m = sessions(runtime);
    try {
      const r = await m.run(
        "s",
        `import json, platform, select, socket, subprocess, threading
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
done = []
t = threading.Thread(target=lambda: done.append(1)); t.start(); t.join()
a, b = socket.socketpair(); b.send(b"x")
print(json.dumps({"release": platform.release(), "seccomp": status["Seccomp"].strip(), "threads": done,
            "select": len(select.select([a], [], [], 1)[0]),
            "child": subprocess.run(["sh", "-c", "echo child"], capture_output=True, text=True).stdout}))`,
        { timeout: 60 },
      );
      assert.equal(r.status, "ok", r.error);
      const inside = JSON.parse(r.stdout);
      assert.notEqual(inside.release, release(), "a container would report the host's kernel");
      // codemode's profile is in force inside gVisor, and the adapted rules keep threads and select working.
      assert.deepEqual(
        { seccomp: inside.seccomp, threads: inside.threads, select: inside.select, child: inside.child },
        { seccomp: "2", threads: [1], select: 1, child: "child\n" },
      );
      const [name] = await ownSandboxes(runtime);
      const evidence = await runtime.inspectIsolation!(name);
      assert.equal(evidence.proven, true, evidence.facts.join("\n"));
      assert.ok(evidence.facts.includes(`podman records the OCI runtime "${findRunsc().path}"`));
    } finally {
      await m.closeAll();
    }
    await assertNoLeftovers(runtime);
  },
});
