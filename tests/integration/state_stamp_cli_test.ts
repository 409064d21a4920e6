/**
 * A state directory a newer codemode wrote (issue 27): every command that reads or writes state refuses
 * it with the error that names both versions, exits 1 and leaves the directory as it was; doctor
 * reports it as a failure.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { STAMP_FILE, STATE_FORMAT } from "../../core/config/state_stamp.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const DENO = join(ROOT, "node_modules", ".bin", "deno");

Deno.test("every command refuses a state directory in a newer format and leaves it alone", () => {
  const home = mkdtempSync(join(tmpdir(), "codemode-newer-state-"));
  try {
    const state = join(home, "state");
    mkdirSync(state);
    writeFileSync(join(state, STAMP_FILE), JSON.stringify({ format: STATE_FORMAT + 1, version: "9.0.0" }));
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      CODEMODE_STATE_DIR: state,
      CODEMODE_RUNTIME: "pyodide",
    };
    const cli = (args: string[], input = "") =>
      spawnSync(DENO, ["run", "-A", "--quiet", join(ROOT, "cli.ts"), ...args], {
        cwd: home,
        env,
        input,
        encoding: "utf8",
        timeout: 120_000,
      });
    for (const args of [["run", "-"], ["serve"], ["stats"], ["servers"], ["search", "echo"]]) {
      const ran = cli(args, "print(1)\n");
      assert.equal(ran.status, 1, `${args.join(" ")}: ${ran.stderr}`);
      assert.match(
        ran.stderr,
        /was written by codemode 9\.0\.0 \(state format 2\), which this codemode .* cannot read: upgrade codemode/,
        args.join(" "),
      );
      assert.equal(ran.stdout, "", `${args.join(" ")} wrote to stdout`);
      assert.deepEqual(readdirSync(state), [STAMP_FILE], `${args.join(" ")} wrote into the directory`);
    }
    const doctor = cli(["doctor", "--quick", "--json"]);
    assert.equal(doctor.status, 1);
    const report = JSON.parse(doctor.stdout);
    assert.equal(report.stateDir.status, "fail");
    assert.deepEqual(report.stateDir.stamp, { format: STATE_FORMAT + 1, version: "9.0.0" });
    assert.ok(report.findings.some((f: { subject: string }) => f.subject === "state directory"));
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
