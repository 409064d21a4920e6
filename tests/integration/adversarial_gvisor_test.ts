/**
 * The adversarial suite's escape attempts (network, filesystem, privileges) and the resource attempts that
 * test the limits (fork, thread and memory bombs, descriptors, runaway code) under gVisor: a real
 * `codemode serve` with CODEMODE_ISOLATION=gvisor on podman, every attempt judged by containment, as on runc
 * (adversarial_test.ts). The other resource attempts test the host's side of the channel, the same under
 * either isolation.
 */
import { podman } from "../../plugins/runtime/podman.ts";
import { adversarialSuite } from "./_adversarial_suite.ts";
import { filesystem, network, privileges } from "./_attempts_escape.ts";
import { resources } from "./_attempts_abuse.ts";

const LIMITS = /fork bomb|memory bomb|thread bomb|file descriptors|ignores SIGINT|killing the runtime/;

await adversarialSuite({
  label: "podman gvisor",
  engine: "podman",
  runtime: podman({ isolation: "gvisor" }),
  attempts: [...network, ...filesystem, ...privileges, ...resources.filter((a) => LIMITS.test(a.name))],
  env: { CODEMODE_ISOLATION: "gvisor" },
});
