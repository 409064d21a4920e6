/** The runtime contract suite against docker. */
import { docker } from "../../plugins/runtime/docker.ts";
import { runtimeContract } from "./_runtime_contract.ts";
import { TEST_IMAGE } from "./_harness.ts";

const runtime = docker();
const detection = await runtime.detect();
const skip = !detection.available
  ? `docker is not usable: ${detection.problems[0]?.message}`
  : !(await runtime.imageExists(TEST_IMAGE))
  ? `image ${TEST_IMAGE} is missing (codemode image build --runtime docker)`
  : undefined;
runtimeContract("docker", () => runtime, skip);
