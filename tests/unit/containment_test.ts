/**
 * The verdict rules of the security suites (tests/integration/_containment.ts), without containers: a
 * probe is judged by whether it was contained and by which layer, never by which signal a kernel sent.
 */
import assert from "node:assert/strict";
import {
  filterActed,
  judge,
  kernelOnlyProfile,
  MARK,
  MARK_ERRNO,
  markedProfile,
  profileRefuses,
} from "../integration/_containment.ts";

Deno.test("judge() counts the filter, a capability check and a kernel without the feature as contained", () => {
  assert.deepEqual(judge("ENOSYS", true), { contained: true, layer: "seccomp", outcome: "ENOSYS" });
  assert.deepEqual(judge("killed:SIGSYS", false), {
    contained: true,
    layer: "seccomp",
    outcome: "killed:SIGSYS",
  });
  assert.deepEqual(judge("EPERM", false), { contained: true, layer: "capabilities", outcome: "EPERM" });
  assert.deepEqual(judge("EACCES", false), { contained: true, layer: "capabilities", outcome: "EACCES" });
  // A kernel without IA-32 emulation faults int 0x80 before seccomp is consulted; one without io_uring
  // answers ENOSYS: both contained, by the kernel.
  assert.deepEqual(judge("killed:SIGSEGV", false), {
    contained: true,
    layer: "kernel",
    outcome: "killed:SIGSEGV",
  });
  assert.deepEqual(judge("ENOSYS", false), { contained: true, layer: "kernel", outcome: "ENOSYS" });
});

Deno.test("judge() fails a call that took effect or died of something no layer sends", () => {
  assert.deepEqual(judge("ok", false), { contained: false, outcome: "ok" });
  assert.deepEqual(judge("killed:SIGKILL", false), { contained: false, outcome: "killed:SIGKILL" });
  assert.deepEqual(judge("EINVAL", false), { contained: false, outcome: "EINVAL" });
});

Deno.test("filterActed() sees the mark, SIGSYS, or an answer that differs from the kernel's alone", () => {
  assert.equal(filterActed("ENOSYS", MARK, "ok"), true);
  assert.equal(filterActed("killed:SIGSYS", "killed:SIGSYS", "killed:SIGSEGV"), true);
  assert.equal(
    filterActed("EPERM", "EPERM", "ok"),
    true,
    "docker's default action: EPERM where the kernel allowed",
  );
  assert.equal(filterActed("killed:SIGSEGV", "killed:SIGSEGV", "killed:SIGSEGV"), false);
  assert.equal(filterActed("EPERM", "EPERM", "EPERM"), false, "refused the same way without the filter");
});

Deno.test("the marked profile keeps every rule and changes only the refusals' errno", () => {
  const marked = JSON.parse(markedProfile());
  assert.equal(marked.defaultErrnoRet, MARK_ERRNO);
  for (const rule of marked.syscalls) {
    if (rule.action === "SCMP_ACT_ERRNO") assert.equal(rule.errnoRet, MARK_ERRNO, rule.names.join());
  }
  assert.deepEqual(JSON.parse(kernelOnlyProfile()), { defaultAction: "SCMP_ACT_ALLOW", syscalls: [] });
  assert.equal(profileRefuses("read"), false);
  assert.equal(profileRefuses("kexec_load"), true);
});
