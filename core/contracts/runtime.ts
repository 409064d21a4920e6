/**
 * The runtime plugin contract: something that can start an isolated Python process (a sandbox)
 * whose stdin/stdout carry the host <-> sandbox protocol.
 * @module
 */
import type { Duplex } from "node:stream";

/** A problem found while detecting a runtime, with one line telling the user how to fix it. */
export interface Problem {
  message: string;
  fix?: string;
  /** The failure says nothing lasting (the engine did not answer in time): its verdict is not cached. */
  transient?: boolean;
}

/** What `detect()` found out about a runtime on this machine. */
export interface RuntimeDetection {
  name: string;
  available: boolean;
  version?: string;
  rootless?: boolean;
  problems: Problem[];
  /**
   * Facts `start()` relies on that detection learned (e.g. whether cgroup limits apply). They are kept
   * with a cached verdict and handed back through `adopt()`, so they must be plain JSON values.
   */
  facts?: Record<string, string | number | boolean>;
}

/** Resource and isolation limits every sandbox gets. */
export interface SandboxLimits {
  /** Memory cap, in the engines' syntax ("512m"); swap is capped at the same value. */
  memory: string;
  /** Maximum number of processes/threads. */
  pids: number;
  /** CPU quota ("1.5"), or undefined for no quota. */
  cpus?: string;
}

/** Everything a runtime needs to start one sandbox. */
export interface SandboxStartOptions {
  /** Container name; unique per session, prefixed so leftovers can be found. */
  name: string;
  /** Image reference (ignored by runtimes without images). */
  image: string;
  /** The program to run inside: a short `python3 -c` bootstrap that reads the runtime from stdin. */
  command: string[];
  limits: SandboxLimits;
  /** Labels that mark the sandbox as ours and name its owner, so a later start can reap leftovers. */
  labels: Record<string, string>;
  /** Host folders the sandbox sees (validated by the config; see docs/files.md). */
  mounts?: SandboxMount[];
}

/** A host folder mounted into the sandbox. */
export interface SandboxMount {
  /** The host folder: absolute, symlinks resolved. */
  host: string;
  /** Where the sandbox sees it (under /data, /mnt or /workspace). */
  target: string;
  readOnly: boolean;
}

/**
 * A duplex byte stream handed to the sandbox as file descriptor `fd` (podman's `--preserve-fds`). Frames
 * then skip the engine's stdio relay (client -> conmon -> container), which costs ~0.15 ms a message.
 */
export interface SandboxChannel {
  fd: number;
  /** The host's end, read and written with its own events (the hot path: no web-stream adapters). */
  socket: Duplex;
}

/** A running sandbox: a byte pipe in each direction plus lifecycle control. */
export interface SandboxProcess {
  stdin: WritableStream<Uint8Array>;
  stdout: ReadableStream<Uint8Array>;
  stderr: ReadableStream<Uint8Array>;
  /** A direct channel for frames after the bootstrap, when the runtime can provide one. */
  channel?: SandboxChannel;
  /** Stops the sandbox for good and removes what it left (container, scratch files). Idempotent. */
  kill(): Promise<void>;
  /** Resolves with the exit code (null when killed by a signal) once the sandbox has ended. */
  exited: Promise<number | null>;
}

/** A sandbox left behind by an earlier codemode process, as found by `listManaged()`. */
export interface ManagedSandbox {
  name: string;
  labels: Record<string, string>;
}

/**
 * What stands between sandbox code and the host kernel: "container" (namespaces, cgroups and seccomp of
 * the host kernel: runc or crun), "gvisor" (a user-space kernel, gVisor's runsc, in front of it) or "wasm"
 * (WebAssembly in a locked-down process: Pyodide).
 */
export type Isolation = "container" | "gvisor" | "wasm";

/** The isolation settings users choose from: the default tier, or gVisor for every sandbox. */
export type IsolationSetting = "container" | "gvisor";

/** What the host saw of a running sandbox's isolation, facts that the image cannot fake. */
export interface IsolationEvidence {
  isolation: Isolation;
  /** Whether every fact agrees that the sandbox runs under `isolation`. */
  proven: boolean;
  /** One line per fact, e.g. `podman records the OCI runtime "/usr/bin/runsc"`. */
  facts: string[];
}

/** A runtime plugin: podman, docker, nerdctl, pyodide. */
export interface RuntimePlugin {
  readonly name: string;
  /** The isolation of the sandboxes it starts; a plugin that leaves it out is taken for "container". */
  readonly isolation?: Isolation;
  /**
   * How the runtime brings `mounts` in: "bind" mounts them (nodev, nosuid, noexec) when it starts a sandbox;
   * "copy" leaves them to the session, which copies the files in over the channel. Unset: no mounts.
   */
  readonly mountMode?: "bind" | "copy";
  /** Why this runtime cannot mount `mount` safely, or undefined when it can (start() refuses the same). */
  mountProblem?(mount: SandboxMount): string | undefined;
  /** Whether the runtime works here; never throws. */
  detect(): Promise<RuntimeDetection>;
  /**
   * What the verdict of `detect()` rests on, besides codemode's version, as one string: for a container
   * engine its binary's path, size and mtime and the image id. A cached verdict is used while this stays
   * the same. Undefined when it can't be told cheaply now (then detection runs); a plugin without it is
   * always detected afresh.
   */
  fingerprint?(): Promise<string | undefined>;
  /** Takes a cached verdict instead of detecting, so `start()` uses its facts without asking again. */
  adopt?(detection: RuntimeDetection): void;
  /** Starts one sandbox. Rejects with a clear error when the runtime cannot start it. */
  start(options: SandboxStartOptions): Promise<SandboxProcess>;
  /** Sandboxes carrying our labels (for reaping leftovers). Runtimes without containers return []. */
  listManaged(): Promise<ManagedSandbox[]>;
  /** Force-removes a sandbox by name; no error when it is already gone. */
  remove(name: string): Promise<void>;
  /**
   * Retries the removals that failed earlier (the engine was missing or broken) until none is left or
   * `timeoutMs` have passed; true when none is left. Called at shutdown; runtimes without them omit it.
   */
  settle?(timeoutMs: number): Promise<boolean>;
  /**
   * Looks at the running sandbox `name` from the host side (the engine's record, the host process behind
   * it) and says which isolation it runs under. Doctor uses it to prove gVisor; runtimes that cannot tell
   * omit it.
   */
  inspectIsolation?(name: string): Promise<IsolationEvidence>;
}

/** The isolation of `plugin`'s sandboxes. */
export function isolationOf(plugin: Pick<RuntimePlugin, "isolation">): Isolation {
  return plugin.isolation ?? "container";
}

/**
 * Whether `plugin` may serve sandboxes under `setting`: "gvisor" takes gVisor runtimes only (never a
 * fallback to runc or Pyodide); "container" takes every runtime that is not gVisor, as before the setting.
 */
export function servesIsolation(
  plugin: Pick<RuntimePlugin, "isolation">,
  setting: IsolationSetting,
): boolean {
  return (isolationOf(plugin) === "gvisor") === (setting === "gvisor");
}

/** Image management that container runtimes offer besides `RuntimePlugin` (`codemode image build`, doctor). */
export interface ImageStore {
  /** Whether image `ref` is present locally; never pulls. */
  imageExists(ref: string): Promise<boolean>;
  /** Loads a root filesystem tar archive as image `ref`, with `labels` where the engine can set them. */
  importImage(tarPath: string, ref: string, labels?: Record<string, string>): Promise<void>;
  /** Image `ref`'s labels (empty when it has none); rejects when the engine cannot say. */
  imageLabels?(ref: string): Promise<Record<string, string>>;
  /** Pulls image `ref` from a registry. */
  pullImage(ref: string): Promise<void>;
  /** Gives image `source` the additional name `target`. */
  tagImage(source: string, target: string): Promise<void>;
}

/** The label naming the codemode version that built an image (`codemode image build` sets it). */
export const IMAGE_VERSION_LABEL = "codemode.version";

/** Whether a runtime plugin also manages images (container runtimes do, Pyodide does not). */
export function hasImageStore(plugin: RuntimePlugin): plugin is RuntimePlugin & ImageStore {
  const candidate = plugin as Partial<ImageStore>;
  return typeof candidate.imageExists === "function" && typeof candidate.importImage === "function";
}
