/**
 * Files in and out of `codemode run`: `--file HOST[:SANDBOX]` (read here, put into the sandbox over its
 * channel before the run) and `--artifacts DIR` (the run's artifacts copied out of the session's store).
 * @module
 */
import { chmod, copyFile, mkdir, readFile, stat } from "node:fs/promises";
import { basename, dirname, join, posix, resolve } from "node:path";
import type { ArtifactLink } from "../core/contracts/output.ts";
import type { ArtifactStore } from "../core/artifacts/store.ts";
import type { SandboxFile } from "../core/sandbox/file_sender.ts";

/** One `--file`: a host file and where the sandbox gets it. */
export interface FileSpec {
  host: string;
  target: string;
}

/** Folders a `--file` may land in: the sandbox's writable ones. */
const WRITABLE = ["/workspace", "/tmp"];

/** Parses `--file` values (`HOST` or `HOST:SANDBOX`); a string says what is wrong with one. */
export function parseFileSpecs(values: string[]): FileSpec[] | string {
  const specs: FileSpec[] = [];
  for (const value of values) {
    const colon = value.lastIndexOf(":/");
    const host = colon > 0 ? value.slice(0, colon) : value;
    const target = colon > 0 ? value.slice(colon + 1) : `/workspace/${basename(host)}`;
    const normal = posix.normalize(target) === target && !target.endsWith("/");
    const writable = WRITABLE.some((dir) => target.startsWith(`${dir}/`));
    if (!host || !normal || !writable) {
      return `invalid --file "${value}": the sandbox path must be a normalised file path under /workspace or ` +
        "/tmp, e.g. data.csv:/workspace/in/data.csv";
    }
    if (target === "/workspace/artifacts" || target.startsWith("/workspace/artifacts/")) {
      return `invalid --file "${value}": /workspace/artifacts is where the run leaves its artifacts`;
    }
    specs.push({ host, target });
  }
  return specs;
}

/** Reads each `--file`; throws naming the file that is missing or not a regular file. */
export async function readFileSpecs(specs: FileSpec[]): Promise<SandboxFile[]> {
  const files: SandboxFile[] = [];
  for (const spec of specs) {
    const info = await stat(spec.host).catch(() => undefined);
    if (!info?.isFile()) {
      throw new Error(`cannot read --file "${spec.host}": ${info ? "not a regular file" : "no such file"}`);
    }
    files.push({ path: spec.target, data: await readFile(spec.host) });
  }
  return files;
}

/** Copies the run's artifacts from `store` into `dir`; returns them with file:// URIs, or why not. */
export async function saveArtifacts(
  store: ArtifactStore,
  links: ArtifactLink[],
  dir: string,
): Promise<ArtifactLink[] | string> {
  const root = resolve(dir);
  const saved: ArtifactLink[] = [];
  try {
    for (const link of links) {
      // Artifact names passed the store's path rules: relative, no "..", no hidden part.
      const target = join(root, link.name);
      await mkdir(dirname(target), { recursive: true });
      await copyFile(store.filePath(link.name), target);
      await chmod(target, 0o644); // the store's copy is owner-only; this one is the user's output

      saved.push({ ...link, uri: new URL(`file://${target}`).href });
    }
  } catch (error) {
    return `cannot write the artifacts to "${dir}": ${(error as Error).message}`;
  }
  return saved;
}
