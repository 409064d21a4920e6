/** The skills suite on rootful podman (see _skills_suite.ts). */
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { skillsSuite } from "./_skills_suite.ts";

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED skills suite on podman: podman or image ${TEST_IMAGE} missing`);
skillsSuite("podman", usable);
