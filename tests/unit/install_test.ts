/**
 * Installing and upgrading (issue 27) without a package manager or an engine: the publishable
 * package.json, the npm bundle's dependency check, `--version`'s install kind, the state directory's
 * stamp, and doctor's warning for an image another codemode version built.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { installKind, setInstallKind, VERSION, versionLine } from "../../core/version.ts";
import {
  claimStateDir,
  NewerStateError,
  readStateStamp,
  STAMP_FILE,
  STATE_FORMAT,
} from "../../core/config/state_stamp.ts";
import { checkStateDir } from "../../core/doctor/checks.ts";
import { checkRuntime, imageVersionProblem } from "../../core/doctor/runtime.ts";
import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { bundleProblems, packageOf } from "../../scripts/build_npm.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const temp = () => mkdtempSync(join(tmpdir(), "codemode-install-"));

Deno.test("package.json is publishable: name, version, licence, repository, engines, bin, files", () => {
  assert.equal(pkg.name, "codemode");
  assert.equal(pkg.version, VERSION, "core/version.ts and package.json name the same version");
  assert.equal(pkg.private, undefined);
  assert.equal(pkg.license, "MIT");
  assert.ok(existsSync(join(ROOT, "LICENSE")));
  assert.match(pkg.repository.url, /^git\+https:\/\//);
  assert.equal(pkg.engines.node, ">=20");
  assert.deepEqual(pkg.bin, { codemode: "bin/codemode.js" });
  assert.match(readFileSync(join(ROOT, "bin", "codemode.js"), "utf8"), /^#!\/usr\/bin\/env node\n/);
  assert.ok(statSync(join(ROOT, "bin", "codemode.js")).mode & 0o100, "the launcher is executable");
  assert.deepEqual(pkg.files, ["bin/codemode.js", "dist/npm/", "sandbox/image/"]);
  // What runs at run time is a dependency; what builds is not.
  for (const runtime of ["deno", "pyodide"]) assert.ok(pkg.dependencies[runtime], runtime);
  assert.ok(!pkg.dependencies.bun && pkg.devDependencies.bun);
  // An installed package runs no script of its own (npm warns about, and may refuse, install scripts).
  for (const script of ["preinstall", "install", "postinstall", "prepare"]) {
    assert.equal(pkg.scripts[script], undefined, `"${script}" would run on the user's machine`);
  }
  assert.match(pkg.scripts.prepack, /build_npm\.ts/);
});

Deno.test("the npm bundle may import only dependencies, and read only files the package ships", () => {
  assert.equal(packageOf("commander"), "commander");
  assert.equal(packageOf("@modelcontextprotocol/server/stdio"), "@modelcontextprotocol/server");
  assert.equal(packageOf("prom-client/lib/registry.js"), "prom-client");
  for (const builtIn of ["node:fs", "./chunk.js", "../x.js", "/abs.js", "https://example.com/x.js"]) {
    assert.equal(packageOf(builtIn), undefined, builtIn);
  }
  const manifest = {
    version: "1.0.0",
    files: ["bin/codemode.js", "sandbox/image/"],
    dependencies: { zod: "4" },
    devDependencies: { express: "5" },
  };
  assert.deepEqual(bundleProblems(manifest, ["zod", "zod"], ["sandbox/image/build_rootfs.sh"]), []);
  assert.deepEqual(bundleProblems(manifest, ["express", "left-pad"], ["sandbox/other.sh"]), [
    'the bundle imports "express", a devDependency: move it to dependencies',
    'the bundle imports "left-pad", which package.json does not depend on',
    'the bundle reads "sandbox/other.sh", which package.json\'s "files" does not ship',
  ]);
  // The real package.json and the files its bundle reads today.
  assert.deepEqual(bundleProblems(pkg, ["commander", "zod"], ["sandbox/image/build_rootfs.sh"]), []);
});

Deno.test("--version names the version and how codemode was installed", () => {
  const before = installKind();
  try {
    assert.equal(versionLine(), `${VERSION} (checkout)`);
    setInstallKind("npm");
    assert.equal(versionLine(), `${VERSION} (npm)`);
    setInstallKind("binary");
    assert.equal(versionLine(), `${VERSION} (binary, ${process.platform}-${process.arch})`);
  } finally {
    setInstallKind(before);
  }
});

Deno.test("a state directory is stamped once, and one a newer format wrote is refused, not read", async () => {
  const dir = join(temp(), "state");
  await claimStateDir(dir, VERSION);
  const path = join(dir, STAMP_FILE);
  assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), { format: STATE_FORMAT, version: VERSION });
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  // A later version in the same format shares the directory and leaves the stamp alone.
  await claimStateDir(dir, "9.9.9");
  assert.equal((await readStateStamp(dir))?.version, VERSION);

  writeFileSync(path, JSON.stringify({ format: STATE_FORMAT + 1, version: "2.0.0" }));
  await assert.rejects(claimStateDir(dir, VERSION), (error: Error) => {
    assert.ok(error instanceof NewerStateError);
    assert.match(error.message, /written by codemode 2\.0\.0 \(state format 2\)/);
    assert.match(error.message, /upgrade codemode to 2\.0\.0 or later, or .*CODEMODE_STATE_DIR/);
    return true;
  });
  assert.equal(JSON.parse(readFileSync(path, "utf8")).version, "2.0.0", "the newer stamp is kept");
  const doctor = await checkStateDir(dir, VERSION);
  assert.equal(doctor.status, "fail");
  assert.equal(doctor.writable, true);
  assert.deepEqual(doctor.stamp, { format: STATE_FORMAT + 1, version: "2.0.0" });

  // A stamp that cannot be read might be a newer one: refused, never overwritten.
  writeFileSync(path, "{not json");
  await assert.rejects(claimStateDir(dir, VERSION), NewerStateError);
  assert.equal(readFileSync(path, "utf8"), "{not json");
  // An older format is taken over (a future format change would migrate here).
  writeFileSync(path, JSON.stringify({ format: 0, version: "0.0.1" }));
  await claimStateDir(dir, VERSION);
  assert.equal((await readStateStamp(dir))?.format, STATE_FORMAT);
  assert.equal((await checkStateDir(dir, VERSION)).status, "ok");
});

Deno.test("a directory that cannot be written is not stamped, and codemode goes on", async () => {
  const file = join(temp(), "file");
  writeFileSync(file, "");
  await claimStateDir(join(file, "state"), VERSION);
  assert.equal(await readStateStamp(join(file, "state")).catch(() => "unreadable"), "unreadable");
});

Deno.test("doctor warns when the image was built by another codemode version, and says how to rebuild", async () => {
  assert.equal(imageVersionProblem("podman", "codemode-sandbox:latest", undefined, VERSION), undefined);
  assert.equal(imageVersionProblem("podman", "codemode-sandbox:latest", VERSION, VERSION), undefined);
  assert.deepEqual(imageVersionProblem("docker", "team/sandbox:1", "0.0.9", VERSION), {
    message: `The sandbox image "team/sandbox:1" was built by codemode 0.0.9; this is codemode ${VERSION}`,
    fix:
      "Rebuild it so the sandbox matches this version: codemode image build --runtime docker --tag team/sandbox:1",
  });
  const runtime: RuntimePlugin & ImageStore = {
    name: "podman",
    detect: () => Promise.resolve({ name: "podman", available: true, version: "4.3.1", problems: [] }),
    start: () => Promise.reject(new Error("no engine in a unit test")),
    listManaged: () => Promise.resolve([]),
    remove: () => Promise.resolve(),
    imageExists: () => Promise.resolve(true),
    imageLabels: () => Promise.resolve({ "codemode.version": "0.0.9" }),
    importImage: () => Promise.resolve(),
    pullImage: () => Promise.resolve(),
    tagImage: () => Promise.resolve(),
  };
  const check = await checkRuntime(runtime, {
    image: "codemode-sandbox:latest",
    limits: { memory: "256m", pids: 64 },
    command: ["python3"],
    bootstrap: () => ({
      type: "bootstrap",
      modules: {},
      packages: [],
      main: "m",
      config: { max_output: 1, servers: [] },
    }),
    maxOutput: 1000,
    version: VERSION,
  });
  assert.equal(check.image?.builtBy, "0.0.9");
  assert.ok(
    check.problems.some((p) =>
      /built by codemode 0\.0\.9/.test(p.message) && /codemode image build/.test(p.fix!)
    ),
    JSON.stringify(check.problems),
  );
});
