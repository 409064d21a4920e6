/** The runtime contract suite against the embedded Pyodide runtime (a locked-down deno subprocess). */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { runtimeContract } from "./_runtime_contract.ts";

const runtime = pyodide({
  stateDir: process.env.CODEMODE_TEST_PYODIDE_STATE ?? mkdtempSync(join(tmpdir(), "cm-pyo-")),
});
const detection = await runtime.detect();
const skip = detection.available ? undefined : `pyodide is not usable: ${detection.problems[0]?.message}`;
runtimeContract("pyodide", () => runtime, skip, { subprocess: false, listsSandboxes: false });
