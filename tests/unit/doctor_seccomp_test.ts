import assert from "node:assert/strict";
import { explainFailure, parseSeccompFacts, seccompProblem } from "../../core/doctor/runtime.ts";

Deno.test("a sandbox whose seccomp(2) probe gets EPERM runs under codemode's profile", () => {
  assert.deepEqual(parseSeccompFacts(`{"mode": "2", "filters": "1", "probe": "EPERM"}`), {
    mode: "filter",
    filters: 1,
    probe: "EPERM",
    codemode: true,
  });
  assert.equal(
    seccompProblem(parseSeccompFacts(`{"mode": "2", "filters": "1", "probe": "EPERM"}`)),
    undefined,
  );
});

Deno.test("an engine's default filter, which allows the probe, is a warning with the setting to change", () => {
  const facts = parseSeccompFacts(`{"mode": "2", "filters": "1", "probe": "ok"}`);
  assert.equal(facts?.codemode, false);
  const problem = seccompProblem(facts);
  assert.match(
    problem?.message ?? "",
    /A seccomp filter other than codemode's is in force \(seccomp\(2\) returned "ok"/,
  );
  assert.match(problem?.fix ?? "", /unset it to use codemode's/);
});

Deno.test("a sandbox with no seccomp filter at all is a warning", () => {
  const facts = parseSeccompFacts(`{"mode": "0", "filters": "0", "probe": "ok"}`);
  assert.deepEqual(facts, { mode: "disabled", filters: 0, probe: "ok", codemode: false });
  assert.equal(seccompProblem(facts)?.message, "The sandbox runs without any seccomp filter");
});

Deno.test("no seccomp facts (Pyodide, an old image, garbage) mean nothing to report, not a warning", () => {
  for (const line of [undefined, "", "{}", "not json", "null", `{"mode": "9"}`]) {
    assert.equal(parseSeccompFacts(line), undefined, String(line));
  }
  assert.equal(seccompProblem(undefined), undefined);
});

Deno.test("a seccomp profile that cannot be read or that the engine rejects is explained with its fix", () => {
  const unreadable = explainFailure(
    "podman",
    `Cannot use the seccomp profile "/etc/x.json" (ENOENT): Set CODEMODE_SECCOMP to a readable JSON profile`,
  );
  assert.equal(unreadable.message, `Cannot use the seccomp profile "/etc/x.json" (ENOENT)`);
  assert.match(unreadable.fix ?? "", /^Set CODEMODE_SECCOMP to a readable JSON profile/);
  const rejected = explainFailure(
    "podman",
    'Sandbox "x" failed to start: exit code 126: Error: OCI runtime error: runc: runc create failed: string ' +
      "BOGUS is not a valid action for seccomp",
  );
  assert.match(
    rejected.message,
    /^The engine rejected the seccomp profile: ".*not a valid action for seccomp"$/,
  );
  assert.match(rejected.fix ?? "", /CODEMODE_SECCOMP/);
  const remote = explainFailure(
    "podman",
    "Error: opening seccomp profile failed: open /tmp/codemode-501/seccomp-0b45.json: no such file or directory",
  );
  assert.match(remote.message, /remote engine/);
  assert.match(remote.fix ?? "", /CODEMODE_SECCOMP/);
});
