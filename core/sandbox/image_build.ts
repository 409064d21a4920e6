/**
 * Builds the sandbox image: a Debian root filesystem from `sandbox/image/build_rootfs.sh` (debootstrap,
 * no registry needed) imported into a container engine, or an image pulled from a registry and tagged.
 * @module
 */

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { IMAGE_VERSION_LABEL, type ImageStore } from "../contracts/runtime.ts";
import { VERSION } from "../version.ts";

/** The image reference sandboxes use unless configured otherwise. */
export const DEFAULT_IMAGE = "codemode-sandbox:latest";

/** The rootfs recipe, resolved next to this module (present in a checkout, not in a compiled binary). */
export const RECIPE_PATH: string = fileURLToPath(
  new URL("../../sandbox/image/build_rootfs.sh", import.meta.url),
);

/** The label an image codemode builds carries, so doctor can tell an image another version built. */
const BUILT_BY = { [IMAGE_VERSION_LABEL]: VERSION };

/** What to build. */
export interface ImageBuildOptions {
  /** Image reference to create. */
  ref?: string;
  /**
   * Build the small image, python3 alone (about 120 MB), instead of the default with numpy, pandas,
   * matplotlib, scipy, scikit-learn, sympy and pillow (about 760 MB).
   */
  minimal?: boolean;
  /** Pull this image and tag it as `ref` instead of building (machines with a registry). */
  from?: string;
  /** Import this existing rootfs tar archive instead of building one (e.g. built earlier by root). */
  rootfs?: string;
  /** Debian mirror URI; default: the one in the machine's apt sources. */
  mirror?: string;
}

/** One progress report; `fraction` (0..1) covers the whole build and never decreases. */
export interface ImageBuildEvent {
  step: "rootfs" | "import" | "pull" | "tag" | "done";
  /** The debootstrap phase during the rootfs step ("retrieve", "unpack", ...). */
  phase?: string;
  message: string;
  fraction: number;
}

/** Runs a command, calling `onLine` for every line of its stdout and stderr; resolves with the exit code. */
export type LineSpawner = (argv: string[], onLine: (line: string) => void) => Promise<number>;

/** Seams for tests, and for the CLI's progress display. */
export interface ImageBuildDeps {
  spawn?: LineSpawner;
  onEvent?: (event: ImageBuildEvent) => void;
  /** Where the rootfs archive is written before import. */
  tmpDir?: string;
  /** The rootfs recipe script. */
  recipe?: string;
}

/** What a successful build produced. */
export interface ImageBuildResult {
  ref: string;
  source: "debootstrap" | "rootfs" | "pull";
  seconds: number;
}

// Measured (packages debootstrap retrieved, bookworm): minbase with python3 is 112 packages, with the
// data-science set 266.
const EXPECTED_PACKAGES = { minimal: 112, dataScience: 266 };

// Where each debootstrap phase starts and ends within the rootfs step. debootstrap unpacks and configures
// the required packages, then unpacks and configures the rest, so those two phases share one range and one
// count (two steps per package).
const PHASES: Record<string, { verb: RegExp; group: string; steps: number; from: number; to: number }> = {
  retrieve: { verb: /^I: Retrieving (\S+)/, group: "retrieve", steps: 1, from: 0.05, to: 0.4 },
  extract: { verb: /^I: Extracting (\S+?)\.*$/, group: "extract", steps: 1, from: 0.4, to: 0.5 },
  unpack: { verb: /^I: Unpacking (\S+?)\.*$/, group: "install", steps: 2, from: 0.5, to: 0.9 },
  configure: { verb: /^I: Configuring (\S+?)\.*$/, group: "install", steps: 2, from: 0.5, to: 0.9 },
};
const MILESTONES: Array<[RegExp, string, number]> = [
  [/^I: Building rootfs/, "start", 0.01],
  [/^I: Removing compilers/, "prune", 0.9],
  [/^I: Building matplotlib/, "fonts", 0.91],
  [/^I: Trimming/, "trim", 0.92],
  [/^I: Packing/, "pack", 0.94],
  [/^I: Wrote/, "written", 1],
];

/** Turns debootstrap's (and the recipe's) "I: ..." lines into progress fractions of the rootfs step. */
export class DebootstrapProgress {
  #counts: Record<string, number> = {};
  #total: number;
  #fraction = 0;

  /** `expectedPackages` sizes the retrieve phase; later phases use the number actually retrieved. */
  constructor(expectedPackages: number) {
    this.#total = expectedPackages;
  }

  /** The progress a line reports, or undefined for lines that report none. */
  line(text: string): { phase: string; message: string; fraction: number } | undefined {
    const message = text.replace(/^I: /, "").trim();
    for (const [phase, { verb, group, steps, from, to }] of Object.entries(PHASES)) {
      const match = verb.exec(text);
      if (!match) continue;
      if (phase === "retrieve" && /^(InRelease|Release|Packages)$/.test(match[1])) {
        return this.#at(phase, message, from);
      }
      const count = this.#counts[group] = (this.#counts[group] ?? 0) + 1;
      if (phase !== "retrieve") this.#total = Math.max(this.#counts.retrieve ?? 0, 1);
      return this.#at(phase, message, from + (to - from) * Math.min(count / (this.#total * steps), 1));
    }
    for (const [pattern, phase, fraction] of MILESTONES) {
      if (pattern.test(text)) return this.#at(phase, message, fraction);
    }
    return undefined;
  }

  #at(phase: string, message: string, fraction: number) {
    this.#fraction = Math.max(this.#fraction, fraction);
    return { phase, message, fraction: this.#fraction };
  }
}

/** Spawns a command with its output split into lines (the default `LineSpawner`). */
export const spawnLines: LineSpawner = (argv, onLine) =>
  new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    for (const stream of [child.stdout, child.stderr]) {
      let rest = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        const lines = (rest + chunk).split("\n");
        rest = lines.pop() ?? "";
        lines.forEach(onLine);
      });
      stream.on("end", () => rest && onLine(rest));
    }
    child.on("error", reject);
    child.on("close", (code) => resolve(code ?? 1));
  });

/** Builds (or pulls, or imports) the sandbox image into `store`; rejects with a message saying what to do. */
export async function buildImage(
  store: ImageStore,
  options: ImageBuildOptions = {},
  deps: ImageBuildDeps = {},
): Promise<ImageBuildResult> {
  const ref = options.ref ?? DEFAULT_IMAGE;
  const emit = deps.onEvent ?? (() => {});
  const started = performance.now();
  const done = (source: ImageBuildResult["source"]): ImageBuildResult => {
    emit({ step: "done", message: `Image "${ref}" is ready`, fraction: 1 });
    return { ref, source, seconds: Math.round((performance.now() - started) / 100) / 10 };
  };

  if (options.from) {
    emit({ step: "pull", message: `Pulling "${options.from}"`, fraction: 0 });
    await store.pullImage(options.from);
    if (options.from !== ref) {
      emit({ step: "tag", message: `Tagging "${options.from}" as "${ref}"`, fraction: 0.95 });
      await store.tagImage(options.from, ref);
    }
    return done("pull");
  }

  if (options.rootfs) {
    emit({ step: "import", message: `Importing "${options.rootfs}" as "${ref}"`, fraction: 0 });
    await store.importImage(options.rootfs, ref, BUILT_BY);
    return done("rootfs");
  }

  const recipe = deps.recipe ?? RECIPE_PATH;
  if (!deps.spawn && !existsSync(recipe)) {
    throw new Error(
      `Cannot find the image recipe "${recipe}": run codemode image build from a checkout, or pass --from IMAGE`,
    );
  }
  const tar = join(deps.tmpDir ?? tmpdir(), `codemode-rootfs-${randomBytes(6).toString("hex")}.tar`);
  const argv = ["bash", recipe];
  if (options.minimal) argv.push("--minimal");
  if (options.mirror) argv.push("--mirror", options.mirror);
  argv.push(tar);

  const progress = new DebootstrapProgress(
    options.minimal ? EXPECTED_PACKAGES.minimal : EXPECTED_PACKAGES.dataScience,
  );
  const errors: string[] = [];
  let lastLine = "";
  try {
    const code = await (deps.spawn ?? spawnLines)(argv, (line) => {
      if (/^E: /.test(line)) errors.push(line.slice(3).trim());
      if (line.trim()) lastLine = line.trim();
      const event = progress.line(line);
      if (event) emit({ step: "rootfs", ...event, fraction: event.fraction * 0.9 });
    });
    if (code !== 0) {
      const reason = errors.at(-1) ?? (lastLine || `exit code ${code}`);
      throw new Error(`Cannot build the sandbox root filesystem: ${reason}`);
    }
    emit({ step: "import", message: `Importing the root filesystem as "${ref}"`, fraction: 0.9 });
    await store.importImage(tar, ref, BUILT_BY);
  } finally {
    await rm(tar, { force: true });
    await rm(`${tar}.partial`, { force: true });
  }
  return done("debootstrap");
}
