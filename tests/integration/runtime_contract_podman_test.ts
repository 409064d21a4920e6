/** The runtime contract suite against rootful podman. */
import { podman } from "../../plugins/runtime/podman.ts";
import { runtimeContract } from "./_runtime_contract.ts";
import { TEST_IMAGE } from "./_harness.ts";

const runtime = podman();
const detection = await runtime.detect();
const skip = !detection.available
  ? `podman is not usable: ${detection.problems[0]?.message}`
  : !(await runtime.imageExists(TEST_IMAGE))
  ? `image ${TEST_IMAGE} is missing (codemode image build --runtime podman)`
  : undefined;
runtimeContract("podman", () => runtime, skip);
