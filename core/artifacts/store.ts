/**
 * One session's artifacts on the host: files under `<dir>/files/`, owner-only (folders 0700, files 0600),
 * within a cap per file and per session, listed and read back by path. A file arrives in pieces into
 * `<dir>/incoming/` and takes its place only once it is complete, so a reader never sees half a file and a
 * refused file leaves nothing behind. Paths are checked again here (see paths.ts): nothing from the sandbox
 * is trusted, and no path is ever looked up on disk that is not a known artifact.
 * @module
 */
import { constants, type FileHandle, mkdir, open, readFile, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import mime from "mime-types";
import type { ArtifactLink } from "../contracts/output.ts";
import { artifactPathProblem, artifactUri } from "./paths.ts";

/** Caps on what one session keeps. */
export interface ArtifactLimits {
  /** Bytes one file may have. */
  maxFile: number;
  /** Bytes all of a session's files may have together. */
  maxTotal: number;
  /** Files a session may keep (each is a resource in `resources/list`). */
  maxFiles?: number;
}

/** What the store knows about one artifact. */
export interface ArtifactInfo {
  path: string;
  size: number;
  mimeType: string;
  /** When it last arrived (ms since the epoch). */
  modified: number;
}

/** Why a file was refused: which cap, or what else was wrong; `note` is a sentence for the result. */
export interface Refusal {
  reason: "too_large" | "session_full" | "too_many" | "conflict" | "bad_path" | "failed";
  note: string;
}

const DEFAULT_MAX_FILES = 1000;
/** Bytes of a file's start kept to tell text from binary when its name says nothing. */
const SNIFF_BYTES = 4096;

/** Where artifact `path` of the session kept in `dir` lies on the host (`path` must have passed the rules). */
export function artifactFile(dir: string, path: string): string {
  return join(dir, "files", path);
}

/** One session's artifacts. */
export class ArtifactStore {
  /** The session's id in URIs: 128 random bits, so no one can guess another session's. */
  readonly id: string;
  readonly dir: string;
  readonly limits: Required<ArtifactLimits>;
  #files = new Map<string, ArtifactInfo>();
  #used = 0;
  /** Bytes of files still arriving, counted against the session cap while they do. */
  #arriving = 0;
  #closed = false;
  #made?: Promise<void>;

  /** A store kept in `dir` (made on first use). */
  constructor(id: string, dir: string, limits: ArtifactLimits) {
    this.id = id;
    this.dir = dir;
    this.limits = { maxFiles: DEFAULT_MAX_FILES, ...limits };
  }

  /** Bytes all artifacts take. */
  get used(): number {
    return this.#used;
  }

  /** Every artifact, oldest first. */
  list(): ArtifactInfo[] {
    return [...this.#files.values()];
  }

  /** One artifact by path, if the session has it. */
  get(path: string): ArtifactInfo | undefined {
    return this.#files.get(path);
  }

  /** The URI of artifact `path`. */
  uri(path: string): string {
    return artifactUri(this.id, path);
  }

  /** An artifact as a result lists it. */
  link(info: ArtifactInfo): ArtifactLink {
    return { uri: this.uri(info.path), name: info.path, mimeType: info.mimeType, size: info.size };
  }

  /** Where artifact `path` is kept on the host (for `codemode run --artifacts`). */
  filePath(path: string): string {
    return artifactFile(this.dir, path);
  }

  /** Opens a known artifact for reading, never through a symlink; undefined when the session has none. */
  async open(path: string): Promise<{ info: ArtifactInfo; handle: FileHandle } | undefined> {
    const info = this.#files.get(path);
    if (!info) return undefined;
    const handle = await open(this.filePath(path), constants.O_RDONLY | constants.O_NOFOLLOW);
    return { info, handle };
  }

  /** A known artifact's bytes; undefined when the session has none by that path. */
  async read(path: string): Promise<Uint8Array | undefined> {
    const opened = await this.open(path);
    if (!opened) return undefined;
    try {
      return await readFile(opened.handle);
    } finally {
      await opened.handle.close();
    }
  }

  /** Starts receiving artifact `path` (`size` as the sandbox announced it); a Refusal says why not. */
  async receive(path: string, size?: number): Promise<Incoming | Refusal> {
    const problem = artifactPathProblem(path);
    if (problem) return { reason: "bad_path", note: problem };
    if (this.#closed) return { reason: "failed", note: "the session has ended" };
    const conflict = this.#conflict(path);
    if (conflict) return { reason: "conflict", note: conflict };
    if (!this.#files.has(path) && this.#files.size >= this.limits.maxFiles) {
      return { reason: "too_many", note: `the session already keeps ${this.limits.maxFiles} artifacts` };
    }
    const early = this.#overCap(path, size ?? 0);
    if (early) return early;
    await (this.#made ??= this.#makeDirs());
    const temp = join(this.dir, "incoming", randomBytes(12).toString("hex"));
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    const handle = await open(temp, flags, 0o600);
    return new Incoming(this, path, temp, handle);
  }

  /** Deletes every artifact of the session; later arrivals are refused. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#files.clear();
    this.#used = 0;
    await rm(this.dir, { recursive: true, force: true });
  }

  /** A refusal when `path` at `size` bytes (`counted` of them already arriving) would pass a cap. @internal */
  overCap(path: string, size: number, counted: number): Refusal | undefined {
    return this.#overCap(path, size, counted);
  }

  /** Moves a complete file into place. @internal */
  async commit(path: string, temp: string, size: number, head: Uint8Array): Promise<ArtifactInfo | Refusal> {
    const conflict = this.#conflict(path);
    if (conflict) return { reason: "conflict", note: conflict };
    const final = this.filePath(path);
    await mkdir(dirname(final), { recursive: true, mode: 0o700 });
    await rename(temp, final);
    const info: ArtifactInfo = { path, size, mimeType: mimeTypeOf(path, head), modified: Date.now() };
    this.#used += size - (this.#files.get(path)?.size ?? 0);
    this.#files.delete(path); // re-inserted last, so the list stays in arrival order
    this.#files.set(path, info);
    return info;
  }

  /** Counts bytes that are arriving (negative when they stop). @internal */
  arriving(delta: number): void {
    this.#arriving += delta;
  }

  #overCap(path: string, size: number, counted = 0): Refusal | undefined {
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    if (size > this.limits.maxFile) {
      return {
        reason: "too_large",
        note: `it is ${mib(size)}, over the ${mib(this.limits.maxFile)} cap per file (CODEMODE_MAX_ARTIFACT)`,
      };
    }
    const replaced = this.#files.get(path)?.size ?? 0;
    if (this.#used + this.#arriving - counted - replaced + size > this.limits.maxTotal) {
      return {
        reason: "session_full",
        note: `the session's artifacts would pass the ${
          mib(this.limits.maxTotal)
        } it may keep (CODEMODE_MAX_SESSION_ARTIFACTS)`,
      };
    }
    return undefined;
  }

  /** A file and a folder cannot share a path: `a` and `a/b` are refused together. */
  #conflict(path: string): string | undefined {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const prefix = parts.slice(0, i).join("/");
      if (this.#files.has(prefix)) return `the artifact "${prefix}" is a file, so it cannot be a folder`;
    }
    for (const known of this.#files.keys()) {
      if (known.startsWith(`${path}/`)) return `"${path}" is already a folder of artifacts`;
    }
    return undefined;
  }

  async #makeDirs(): Promise<void> {
    await mkdir(join(this.dir, "files"), { recursive: true, mode: 0o700 });
    await mkdir(join(this.dir, "incoming"), { recursive: true, mode: 0o700 });
  }
}

/** A file on its way in: written piece by piece, then committed or aborted. */
export class Incoming {
  readonly path: string;
  #store: ArtifactStore;
  #temp: string;
  #handle?: FileHandle;
  #size = 0;
  #head: Uint8Array = new Uint8Array(0);

  /** Used by ArtifactStore.receive(). */
  constructor(store: ArtifactStore, path: string, temp: string, handle: FileHandle) {
    this.#store = store;
    this.path = path;
    this.#temp = temp;
    this.#handle = handle;
  }

  /** Bytes received so far. */
  get size(): number {
    return this.#size;
  }

  /** Appends bytes; a Refusal (and the file aborted) when they pass a cap. */
  async write(bytes: Uint8Array): Promise<Refusal | undefined> {
    if (!this.#handle) return { reason: "failed", note: "the file was already finished" };
    const over = this.#store.overCap(this.path, this.#size + bytes.length, this.#size);
    if (over) {
      await this.abort();
      return over;
    }
    if (this.#head.length < SNIFF_BYTES) {
      this.#head = concat(this.#head, bytes.subarray(0, SNIFF_BYTES - this.#head.length));
    }
    this.#store.arriving(bytes.length);
    this.#size += bytes.length;
    for (let at = 0; at < bytes.length;) {
      at += (await this.#handle.write(bytes, at, bytes.length - at)).bytesWritten;
    }
    return undefined;
  }

  /** Moves the complete file into place; a Refusal when it cannot be (and nothing is kept). */
  async commit(): Promise<ArtifactInfo | Refusal> {
    if (!this.#handle) return { reason: "failed", note: "the file was already finished" };
    await this.#release();
    try {
      const result = await this.#store.commit(this.path, this.#temp, this.#size, this.#head);
      if ("reason" in result) await rm(this.#temp, { force: true });
      return result;
    } catch (error) {
      await rm(this.#temp, { force: true });
      return { reason: "failed", note: `the host could not keep it: ${(error as Error).message}` };
    }
  }

  /** Drops the partial file. */
  async abort(): Promise<void> {
    if (!this.#handle) return;
    await this.#release();
    await rm(this.#temp, { force: true });
  }

  async #release(): Promise<void> {
    const handle = this.#handle!;
    this.#handle = undefined;
    this.#store.arriving(-this.#size);
    await handle.close().catch(() => {});
  }
}

/** The MIME type of an artifact: from its name, else text/plain for UTF-8 text, else octet-stream. */
export function mimeTypeOf(path: string, head: Uint8Array): string {
  const byName = mime.lookup(path);
  if (typeof byName === "string") return byName;
  return looksLikeText(head) ? "text/plain" : "application/octet-stream";
}

/** Whether bytes are UTF-8 text (no NUL; a character cut at the end is fine). */
export function looksLikeText(bytes: Uint8Array): boolean {
  if (bytes.includes(0)) return false;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: true });
    return true;
  } catch {
    return false;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
