/** The skills suite on docker (see _skills_suite.ts). */
import { docker } from "../../plugins/runtime/docker.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { skillsSuite } from "./_skills_suite.ts";

const runtime = docker();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED skills suite on docker: docker or image ${TEST_IMAGE} missing`);
skillsSuite("docker", usable);
