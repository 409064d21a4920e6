/** The runtime contract suite against rootless podman, run as an unprivileged user through runuser. */
import { podman } from "../../plugins/runtime/podman.ts";
import { runtimeContract } from "./_runtime_contract.ts";
import { TEST_IMAGE } from "./_harness.ts";

const user = process.env.CODEMODE_ROOTLESS_USER ?? "codemode-rootless";
const runtime = podman({ command: ["runuser", "-u", user, "--", "podman"] });
const detection = await runtime.detect();
const skip = !detection.available
  ? `rootless podman (user ${user}) is not usable: ${detection.problems[0]?.message}; run scripts/setup.sh`
  : !detection.rootless
  ? "podman through runuser did not report rootless mode"
  : !(await runtime.imageExists(TEST_IMAGE))
  ? `image ${TEST_IMAGE} is missing for ${user}`
  : undefined;
runtimeContract("podman rootless", () => runtime, skip);
