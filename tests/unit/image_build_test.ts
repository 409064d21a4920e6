import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import type { ImageStore } from "../../core/contracts/runtime.ts";
import {
  buildImage,
  DebootstrapProgress,
  DEFAULT_IMAGE,
  type ImageBuildEvent,
  type LineSpawner,
  RECIPE_PATH,
} from "../../core/sandbox/image_build.ts";

/** An image store that records what it was asked to do. */
function fakeStore(calls: string[], options: { failImport?: boolean } = {}): ImageStore {
  return {
    imageExists: (ref) => Promise.resolve(calls.includes(`import ${ref}`)),
    importImage: (tar, ref) => {
      calls.push(`import ${ref}`);
      calls.push(`tar existed: ${existsSync(tar)}`);
      return options.failImport ? Promise.reject(new Error("Cannot import")) : Promise.resolve();
    },
    pullImage: (ref) => (calls.push(`pull ${ref}`), Promise.resolve()),
    tagImage: (source, target) => (calls.push(`tag ${source} ${target}`), Promise.resolve()),
  };
}

const DEBOOTSTRAP_LOG = [
  "I: Building rootfs for bookworm from http://mirror.invalid/debian with python3,ca-certificates",
  "I: Retrieving InRelease ",
  "I: Retrieving Packages ",
  "I: Validating Packages ",
  "I: Retrieving adduser 3.134",
  "I: Validating adduser 3.134",
  "I: Retrieving python3 3.11.2-1+b1",
  "I: Extracting adduser...",
  "I: Unpacking required packages...",
  "I: Unpacking adduser...",
  "I: Configuring required packages...",
  "I: Configuring adduser...",
  "I: Unpacking python3...",
  "I: Configuring python3...",
  "I: Base system installed successfully.",
  "I: Trimming documentation and caches",
  "I: Packing /tmp/x.tar",
  "I: Wrote /tmp/x.tar (117M)",
];

/** A spawner that plays back a debootstrap log and writes the archive the recipe would write. */
function playback(lines: string[], code = 0, argvSeen: string[][] = []): LineSpawner {
  return (argv, onLine) => {
    argvSeen.push(argv);
    lines.forEach(onLine);
    if (code === 0) writeFileSync(argv.at(-1)!, "tar");
    return Promise.resolve(code);
  };
}

Deno.test("DebootstrapProgress counts packages per phase and never goes backwards", () => {
  const progress = new DebootstrapProgress(2);
  const events = DEBOOTSTRAP_LOG.map((line) => progress.line(line));
  assert.equal(progress.line("W: some warning"), undefined);
  const reported = events.filter((event) => event !== undefined);
  const fractions = reported.map((event) => event.fraction);
  assert.deepEqual(fractions, [...fractions].sort((a, b) => a - b));
  assert.equal(fractions.at(-1), 1);
  const phases = new Set(reported.map((event) => event.phase));
  for (const phase of ["start", "retrieve", "extract", "unpack", "configure", "trim", "pack", "written"]) {
    assert.ok(phases.has(phase), phase);
  }
  // "Unpacking required packages..." is a heading, not a package: two packages unpacked of two retrieved.
  const unpacked = reported.filter((event) => event.phase === "unpack").map((event) => event.message);
  assert.deepEqual(unpacked, ["Unpacking adduser...", "Unpacking python3..."]);
  // Unpacking and configuring share one range: two steps for each of the two retrieved packages.
  assert.equal(reported.find((event) => event.message === "Unpacking adduser...")?.fraction, 0.6);
  assert.equal(reported.find((event) => event.message === "Configuring python3...")?.fraction, 0.9);
});

Deno.test("buildImage() runs the recipe, reports progress, imports the archive and deletes it", async () => {
  const calls: string[] = [];
  const events: ImageBuildEvent[] = [];
  const argvSeen: string[][] = [];
  const result = await buildImage(
    fakeStore(calls),
    { minimal: true, mirror: "http://m.invalid/debian" },
    {
      spawn: playback(DEBOOTSTRAP_LOG, 0, argvSeen),
      onEvent: (event) => events.push(event),
    },
  );
  assert.equal(result.ref, DEFAULT_IMAGE);
  assert.equal(result.source, "debootstrap");
  assert.deepEqual(calls, [`import ${DEFAULT_IMAGE}`, "tar existed: true"]);
  const argv = argvSeen[0];
  assert.deepEqual(argv.slice(0, 5), [
    "bash",
    RECIPE_PATH,
    "--minimal",
    "--mirror",
    "http://m.invalid/debian",
  ]);
  assert.equal(existsSync(argv.at(-1)!), false, "the archive is removed after import");
  assert.deepEqual([...new Set(events.map((event) => event.step))], ["rootfs", "import", "done"]);
  assert.ok(events.every((event, i) => i === 0 || event.fraction >= events[i - 1].fraction));
  assert.ok(events.filter((event) => event.step === "rootfs").every((event) => event.fraction <= 0.9));
});

Deno.test("buildImage() reports the recipe's error line when the rootfs build fails", async () => {
  const calls: string[] = [];
  await assert.rejects(
    buildImage(fakeStore(calls), {}, {
      spawn: playback(["I: Building rootfs", "E: debootstrap needs root: run as root or with sudo"], 1),
    }),
    { message: "Cannot build the sandbox root filesystem: debootstrap needs root: run as root or with sudo" },
  );
  assert.deepEqual(calls, []);
});

Deno.test("buildImage() deletes the archive even when the import fails", async () => {
  const argvSeen: string[][] = [];
  await assert.rejects(
    buildImage(fakeStore([], { failImport: true }), {}, { spawn: playback(DEBOOTSTRAP_LOG, 0, argvSeen) }),
    /Cannot import/,
  );
  assert.equal(existsSync(argvSeen[0].at(-1)!), false);
});

Deno.test("buildImage() pulls and tags with --from instead of building", async () => {
  const calls: string[] = [];
  const result = await buildImage(fakeStore(calls), { from: "registry.invalid/py:3", ref: "mine:1" }, {
    spawn: () => Promise.reject(new Error("must not build")),
  });
  assert.equal(result.source, "pull");
  assert.deepEqual(calls, ["pull registry.invalid/py:3", "tag registry.invalid/py:3 mine:1"]);
});

Deno.test("buildImage() imports an existing rootfs archive as given", async () => {
  const calls: string[] = [];
  const result = await buildImage(fakeStore(calls), { rootfs: "/srv/rootfs.tar" }, {
    spawn: () => Promise.reject(new Error("must not build")),
  });
  assert.equal(result.source, "rootfs");
  assert.deepEqual(calls, [`import ${DEFAULT_IMAGE}`, "tar existed: false"]);
});

Deno.test("the image recipe ships next to the image builder", () => {
  assert.ok(existsSync(RECIPE_PATH), RECIPE_PATH);
});

Deno.test("buildImage() builds the data-science image unless asked for the minimal one", async () => {
  const argvSeen: string[][] = [];
  await buildImage(fakeStore([]), {}, { spawn: playback(DEBOOTSTRAP_LOG, 0, argvSeen) });
  assert.deepEqual(argvSeen[0].slice(0, -1), ["bash", RECIPE_PATH]);
});

Deno.test("the recipe keeps what the libraries need and purges the compilers scipy's pythran pulls in", () => {
  const dir = Deno.makeTempDirSync();
  const block = (name: string, depends = "", extra = "") =>
    `Package: ${name}\nStatus: install ok installed\nPriority: optional\n${
      depends ? `Depends: ${depends}\n` : ""
    }${extra}`;
  const status = [
    block("base-files", "", "Essential: yes"),
    block("python3", "libpython3.11-stdlib (>= 3.11)"),
    block("libpython3.11-stdlib"),
    block("python3-scipy", "python3-numpy, python3-pythran, libblas.so.3 | libblas3"),
    block("python3-numpy", "python3:any"),
    block("libopenblas0-pthread", "", "Provides: libblas.so.3\n"),
    block("python3-pythran", "g++, libboost-dev"),
    block("g++", "gcc"),
    block("gcc"),
    block("libboost-dev"),
    block("python3-pil", "mime-support | python3-pil.imagetk"),
    block("python3-pil.imagetk", "python3-tk"),
    block("python3-tk"),
    block("removed-pkg", "", "").replace("install ok installed", "deinstall ok config-files"),
  ].join("\n\n") + "\n";
  Deno.writeTextFileSync(`${dir}/status`, status);
  const script = new URL("../../sandbox/image/unneeded_packages.py", import.meta.url).pathname;
  const out = spawnSync("python3", [
    "-c",
    `import runpy; m = runpy.run_path(${JSON.stringify(script)})\n` +
    `print(" ".join(m["unneeded"](m["installed"](${
      JSON.stringify(`${dir}/status`)
    }), ["python3-scipy", "python3-pil"])))`,
  ], { encoding: "utf8" });
  assert.equal(out.stderr, "");
  assert.equal(out.stdout.trim(), "g++ gcc libboost-dev python3-pil.imagetk python3-pythran python3-tk");
  Deno.removeSync(dir, { recursive: true });
});
