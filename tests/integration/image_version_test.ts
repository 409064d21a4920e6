/**
 * Upgrades against real podman and docker (issue 27): an image codemode imports carries the version that
 * built it as a label, and `codemode doctor` warns about an image another version built, with the
 * command that rebuilds it.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { IMAGE_VERSION_LABEL } from "../../core/contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../../core/sandbox/image_build.ts";
import { VERSION } from "../../core/version.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import { podman } from "../../plugins/runtime/podman.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const tag = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const has = (engine: string) => spawnSync(engine, ["image", "inspect", DEFAULT_IMAGE]).status === 0;
const test = (name: string, ignore: boolean, fn: () => Promise<void> | void) =>
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });

for (const [engine, plugin] of [["podman", podman()], ["docker", docker()]] as const) {
  test(`${engine}: an imported image carries the codemode version that built it`, !has(engine), async () => {
    const dir = mkdtempSync(join(tmpdir(), "codemode-label-"));
    const ref = `codemode-test-label-${tag}:latest`;
    try {
      mkdirSync(join(dir, "root"));
      writeFileSync(join(dir, "root", "marker"), "x");
      assert.equal(spawnSync("tar", ["cf", join(dir, "root.tar"), "-C", join(dir, "root"), "."]).status, 0);
      await plugin.importImage(join(dir, "root.tar"), ref, { [IMAGE_VERSION_LABEL]: VERSION });
      assert.deepEqual(await plugin.imageLabels!(ref), { [IMAGE_VERSION_LABEL]: VERSION });
      await assert.rejects(plugin.imageLabels!(`codemode-test-absent-${tag}:latest`), /Cannot inspect/);
    } finally {
      spawnSync(engine, ["rmi", "-f", ref]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test(
  "doctor warns about an image another codemode version built, and says how to rebuild it",
  !has("podman"),
  () => {
    const ref = `codemode-test-old-${tag}:latest`;
    const container = `codemode-test-old-${tag}`;
    const home = mkdtempSync(join(tmpdir(), "codemode-old-image-"));
    try {
      // The sandbox image as version 0.0.1 would have labelled it (a commit adds no files).
      assert.equal(spawnSync("podman", ["create", "--name", container, DEFAULT_IMAGE, "true"]).status, 0);
      const commit = spawnSync("podman", [
        "commit",
        "-q",
        "--change",
        `LABEL ${IMAGE_VERSION_LABEL}=0.0.1`,
        container,
        ref,
      ], {
        encoding: "utf8",
      });
      assert.equal(commit.status, 0, commit.stderr);
      const doctor = spawnSync(
        join(ROOT, "node_modules", ".bin", "deno"),
        ["run", "-A", "--quiet", join(ROOT, "cli.ts"), "doctor", "--quick", "--json"],
        {
          cwd: home,
          encoding: "utf8",
          env: {
            PATH: process.env.PATH,
            HOME: home,
            CODEMODE_STATE_DIR: join(home, "state"),
            CODEMODE_RUNTIME: "podman",
            CODEMODE_IMAGE: ref,
          },
        },
      );
      const report = JSON.parse(doctor.stdout);
      const check = report.runtimes.find((r: { name: string }) => r.name === "podman");
      assert.equal(check.image.builtBy, "0.0.1");
      assert.equal(check.sandbox.ok, true, "the image still works: a warning, not a failure");
      assert.equal(check.status, "warn");
      const finding = report.findings.find((f: { message: string }) =>
        /built by codemode 0\.0\.1/.test(f.message)
      );
      assert.ok(finding, JSON.stringify(report.findings));
      assert.equal(finding.status, "warn");
      assert.equal(
        finding.fix,
        `Rebuild it so the sandbox matches this version: codemode image build --runtime podman --tag ${ref}`,
      );
      assert.equal(doctor.status, 0, "warnings do not fail doctor");
    } finally {
      spawnSync("podman", ["rm", "-f", container]);
      spawnSync("podman", ["rmi", "-f", ref]);
      rmSync(home, { recursive: true, force: true });
    }
  },
);
