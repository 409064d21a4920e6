/**
 * The image store of the OCI runtimes: whether an image is there (told apart from an engine that failed
 * to say so), importing a root filesystem with codemode's image config and labels, reading an image's
 * labels, pulling and tagging.
 * @module
 */

import type { ImageStore, Problem } from "../../core/contracts/runtime.ts";
import { diagnose, type ExecResult, firstErrorLine, type OciEngine } from "./_oci_exec.ts";

// Image config for an imported root filesystem. The root is read-only and nobody's home does not exist,
// so matplotlib gets a config directory on the /tmp tmpfs instead of warning on every import.
const IMAGE_CONFIG = [
  "ENV LANG=C.UTF-8",
  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  "ENV MPLCONFIGDIR=/tmp/matplotlib",
  "WORKDIR /workspace",
  'CMD ["python3"]',
];

/** Runs one engine CLI command, given the arguments after the CLI prefix. */
export type EngineRun = (args: string[], timeoutMs?: number, proxies?: boolean) => Promise<ExecResult>;

/** The image store, and the lookup that tells a missing image from a failing engine. */
export interface OciImages extends ImageStore {
  lookUpImage(ref: string): Promise<{ found: boolean; problem?: Problem }>;
  imageLabels(ref: string): Promise<Record<string, string>>;
}

/** The image store of `engine`, driving its CLI through `run`. */
export function ociImages(engine: OciEngine, run: EngineRun): OciImages {
  async function imageExists(ref: string): Promise<boolean> {
    return (await lookUpImage(ref)).found;
  }

  /**
   * Whether the image is there, told apart from an engine that failed to say: `podman image exists`
   * exits 1 without a word for a missing image, docker and nerdctl name the missing image. Anything
   * else is the engine's own failure, reported as such rather than as a missing image.
   */
  async function lookUpImage(ref: string): Promise<{ found: boolean; problem?: Problem }> {
    const args = engine === "podman"
      ? ["image", "exists", ref]
      : ["image", "inspect", "--format", "{{.Id}}", ref];
    const result = await run(args);
    if (result.code === 0) return { found: true };
    const absent = engine === "podman"
      ? result.code === 1 && !result.stderr.trim()
      : /no such (image|object)|not found/i.test(result.stderr);
    return absent
      ? { found: false }
      : { found: false, problem: diagnose(engine, result.stderr, result.spawnError) };
  }

  async function checked(what: string, args: string[], timeoutMs: number, proxies = false): Promise<void> {
    const result = await run(args, timeoutMs, proxies);
    if (result.code !== 0) {
      const problem = diagnose(engine, result.stderr, result.spawnError);
      const reason = problem.fix ? `${problem.message}: ${problem.fix}` : firstErrorLine(result.stderr);
      throw new Error(`Cannot ${what} with ${engine}: ${reason}`);
    }
  }

  async function importImage(
    tarPath: string,
    ref: string,
    labels: Record<string, string> = {},
  ): Promise<void> {
    // nerdctl import has no --change (so no labels either); the engines give a default PATH to images
    // without one.
    const instructions = [
      ...IMAGE_CONFIG,
      ...Object.entries(labels).map(([key, value]) => `LABEL ${key}=${JSON.stringify(value)}`),
    ];
    const changes = engine === "nerdctl"
      ? []
      : instructions.flatMap((instruction) => ["--change", instruction]);
    await checked(`import "${tarPath}" as "${ref}"`, ["import", ...changes, tarPath, ref], 600_000);
  }

  async function imageLabels(ref: string): Promise<Record<string, string>> {
    const result = await run(["image", "inspect", "--format", "{{json .Config.Labels}}", ref], 15_000);
    if (result.code !== 0) {
      throw new Error(`Cannot inspect "${ref}" with ${engine}: ${firstErrorLine(result.stderr)}`);
    }
    const labels = JSON.parse(result.stdout.trim() || "null") as Record<string, unknown> | null;
    return Object.fromEntries(
      Object.entries(labels ?? {}).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
    );
  }

  return {
    imageExists,
    lookUpImage,
    importImage,
    imageLabels,
    pullImage: (ref) => checked(`pull "${ref}"`, ["pull", ref], 1_800_000, true),
    tagImage: (source, target) => checked(`tag "${source}" as "${target}"`, ["tag", source, target], 60_000),
  };
}
