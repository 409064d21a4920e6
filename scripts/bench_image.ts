/**
 * Section "image" (issue 13): building the default (data-science) sandbox image against `--minimal`, each
 * with the product's recipe from scratch (debootstrap from the machine's apt mirror, downloads included,
 * then `podman import` through the podman plugin), and the size each image takes in podman's store.
 * The scratch images are removed afterwards; `codemode-sandbox:latest` is not touched. Needs root.
 * @module
 */
import { rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podman } from "../plugins/runtime/podman.ts";
import { RECIPE_PATH } from "../core/sandbox/image_build.ts";
import { exec, row, type SectionResult, works } from "./bench_harness.ts";

interface Built {
  buildSeconds: number;
  importSeconds: number;
  tarMiB: number;
  imageMiB: number;
}

/** Builds one variant into a scratch tag, measures it, removes it. */
async function build(variant: "minimal" | "default"): Promise<Built> {
  const tar = join(tmpdir(), `codemode-bench-${variant}-${process.pid}.tar`);
  const ref = `localhost/codemode-bench-${variant}:${process.pid}`;
  try {
    let start = performance.now();
    const args = [RECIPE_PATH, ...(variant === "minimal" ? ["--minimal"] : []), tar];
    const built = await exec("bash", args, 3 * 60 * 60_000);
    if (built.code !== 0) {
      throw new Error(`Building the ${variant} image failed: ${built.stderr.slice(-500)}`);
    }
    const buildSeconds = (performance.now() - start) / 1000;
    const tarMiB = statSync(tar).size / 2 ** 20;
    start = performance.now();
    await podman().importImage(tar, ref);
    const importSeconds = (performance.now() - start) / 1000;
    const size = await exec("podman", ["image", "inspect", "--format", "{{.Size}}", ref]);
    return { buildSeconds, importSeconds, tarMiB, imageMiB: Number(size.stdout.trim()) / 2 ** 20 };
  } finally {
    rmSync(tar, { force: true });
    rmSync(`${tar}.partial`, { force: true });
    await exec("podman", ["rmi", "-f", ref]);
  }
}

/** Runs the image section. */
export async function benchImage(): Promise<SectionResult> {
  const result: SectionResult = { name: "image", rows: [], notes: [] };
  if (
    process.getuid?.() !== 0 || !(await works("debootstrap", ["--version"])) ||
    !(await works("podman", ["--version"]))
  ) {
    result.skipped = "needs root, debootstrap and podman (the recipe runs debootstrap)";
    return result;
  }
  const minimal = await build("minimal");
  const full = await build("default");
  const section = "image";
  result.rows.push(
    row({
      section,
      metric:
        "build the default image from scratch (numpy, pandas, matplotlib, scipy, scikit-learn, sympy, pillow)",
      value: full.buildSeconds,
      unit: "s",
      baseline: { label: "--minimal (python3 alone)", value: minimal.buildSeconds },
      note: "debootstrap with downloads from the apt mirror",
    }),
    row({
      section,
      metric: "import the image into podman",
      value: full.importSeconds,
      unit: "s",
      baseline: { label: "--minimal", value: minimal.importSeconds },
    }),
    row({
      section,
      metric: "image size in podman's store",
      value: full.imageMiB,
      unit: "MiB",
      baseline: { label: "--minimal", value: minimal.imageMiB },
      note: `root filesystem archive: ${full.tarMiB.toFixed(0)} MiB against ${minimal.tarMiB.toFixed(0)} MiB`,
    }),
  );
  return result;
}
