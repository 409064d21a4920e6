/**
 * The shared base of the OCI-CLI runtimes (podman, docker, nerdctl): one pure function builds the hardened
 * `run` argument list, and one factory turns an engine CLI into a runtime plugin with an image store.
 * @module
 */

import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { stat } from "node:fs/promises";
import process from "node:process";
import { type Duplex, Readable, Writable } from "node:stream";
import type {
  ImageStore,
  ManagedSandbox,
  Problem,
  RuntimeDetection,
  RuntimePlugin,
  SandboxLimits,
  SandboxMount,
  SandboxProcess,
  SandboxStartOptions,
} from "../../core/contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../../core/sandbox/image_build.ts";
import {
  diagnose,
  engineChoiceEnv,
  engineEnv,
  execCli,
  firstErrorLine,
  parseInspectLines,
  parseMemory,
} from "./_oci_exec.ts";
import { whichSync } from "./_executable.ts";
import { PendingRemovals } from "./_pending_removals.ts";
import { type SeccompChoice, type SeccompProfileError, seccompProfilePath } from "./seccomp.ts";

/** The engines this base knows how to drive. */
export type OciEngine = "podman" | "docker" | "nerdctl";

/** The label every sandbox carries, so leftovers of a crashed server can be found and reaped. */
export const MANAGED_LABEL = "codemode.managed";

/** Options shared by the podman, docker and nerdctl plugins. */
export interface OciOptions {
  /** The engine CLI as an argv prefix, e.g. ["podman"] or ["runuser", "-u", "someone", "--", "podman"]. */
  command?: string[];
  /** OCI runtime passed as `--runtime` (e.g. "runc"); undefined uses the engine's default. */
  runtime?: string;
  /** Arguments added to `run` before the image (escape hatch; they can weaken the sandbox). */
  extraArgs?: string[];
  /** Run a minimal init as PID 1 that reaps orphans and forwards signals. */
  init?: boolean;
  /** RLIMIT_NOFILE, soft and hard; explicit because engine defaults can exceed the host's hard limit. */
  nofile?: number;
  /** RLIMIT_NPROC, soft and hard; undefined derives it from the pids limit. */
  nproc?: number;
  /** Size of each of the /tmp and /workspace tmpfs mounts. */
  tmpfsSize?: string;
  /** The image `detect()` checks for and probes. */
  image?: string;
  /** Seccomp profile: "codemode" (default, the built-in allowlist), "engine" (its default) or a path. */
  seccomp?: SeccompChoice;
  /** Hand frames a direct socket as fd 3 (`--preserve-fds`); podman only, on by default there. */
  directChannel?: boolean;
}

/** Everything `buildRunArgs` needs besides the start options: resolved, with no defaults left to apply. */
export interface OciRunConfig {
  engine: OciEngine;
  runtime?: string;
  init: boolean;
  nofile: number;
  nproc: number;
  tmpfsSize: string;
  /** Also cap memory with RLIMIT_DATA (bytes), for hosts where the engine cannot apply cgroup limits. */
  dataLimit?: number;
  /** Path of the seccomp profile file; undefined leaves the engine's default profile. */
  seccomp?: string;
  extraArgs: string[];
  /** Pass the sandbox a direct channel as fd 3 (`--preserve-fds 1`). */
  channel: boolean;
}

/** Builds the `run` arguments (after the CLI prefix) for one sandbox; pure, so tests check it flag by flag. */
export function buildRunArgs(start: SandboxStartOptions, config: OciRunConfig): string[] {
  const { limits } = start;
  const labels: Record<string, string> = { ...start.labels, [MANAGED_LABEL]: "true" };
  const tmpfs = `rw,noexec,nosuid,nodev,size=${config.tmpfsSize},mode=1777`;
  const args = ["run", "-i", "--rm", "--name", start.name];
  for (const key of Object.keys(labels).sort()) args.push("--label", `${key}=${labels[key]}`);
  args.push(
    // No registry is contacted while starting a sandbox; a missing image fails fast instead.
    "--pull",
    "never",
    "--network",
    "none",
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    ...(config.seccomp ? ["--security-opt", `seccomp=${config.seccomp}`] : []),
    "--user",
    "65534:65534",
    "--memory",
    limits.memory,
    "--memory-swap",
    limits.memory,
    "--pids-limit",
    String(limits.pids),
  );
  if (limits.cpus !== undefined) args.push("--cpus", limits.cpus);
  args.push("--tmpfs", `/tmp:${tmpfs}`, "--tmpfs", `/workspace:${tmpfs}`);
  for (const mount of start.mounts ?? []) args.push(...mountArgs(config.engine, mount));
  args.push("--ulimit", `nofile=${config.nofile}:${config.nofile}`);
  args.push("--ulimit", `nproc=${config.nproc}:${config.nproc}`);
  if (config.dataLimit !== undefined) args.push("--ulimit", `data=${config.dataLimit}:${config.dataLimit}`);
  args.push("--workdir", "/workspace");
  // Without an init, Python is PID 1: orphans of user code become zombies that count against the pids
  // limit for the whole session, and PID 1 ignores signals it has no handler for.
  if (config.init) args.push("--init");
  if (config.runtime) args.push("--runtime", config.runtime);
  if (config.channel) args.push("--preserve-fds", "1");
  if (config.engine === "podman") {
    // --read-only alone still gives writable, executable /run and /var/tmp; --http-proxy would copy the
    // CLI's proxy variables into the container; --env-host=false guards against a containers.conf default.
    args.push("--read-only-tmpfs=false", "--http-proxy=false", "--env-host=false");
  }
  // The protocol stream is not kept in a log file (disk use, and a copy of everything the agent sent).
  // nerdctl has no "none" driver.
  if (config.engine !== "nerdctl") args.push("--log-driver", "none");
  args.push(...config.extraArgs, start.image, ...start.command);
  return args;
}

/** The options every mount gets: the sandbox may not run, or gain privileges from, anything in it. */
export const MOUNT_OPTIONS = "nodev,nosuid,noexec";

/**
 * Why `engine` cannot mount `mount` safely, or undefined when it can. docker applies mount options only by
 * remounting, which its local volume driver does for read-only binds alone: a writable bind would keep
 * exec, suid and dev, so docker is refused it. nerdctl is not supported.
 */
export function mountProblem(engine: OciEngine, mount: SandboxMount): string | undefined {
  if (engine === "nerdctl") return `nerdctl sandboxes cannot mount host folders ("${mount.host}")`;
  if (engine === "docker" && !mount.readOnly) {
    return `Cannot mount "${mount.host}" read-write at "${mount.target}" with docker: docker applies ` +
      `${MOUNT_OPTIONS} to read-only mounts only; make it read-only (drop ":rw" in CODEMODE_MOUNTS or the ` +
      "config file's mounts) or use podman (CODEMODE_RUNTIME=podman)";
  }
  return undefined;
}

/**
 * The `run` arguments that mount one host folder with nodev, nosuid and noexec. podman takes them on `-v`.
 * docker's `-v` and bind `--mount` take none of them, so docker gets an anonymous volume of its local driver
 * that binds the folder with `o=bind,ro,nodev,nosuid,noexec` (removed with the container).
 */
export function mountArgs(engine: OciEngine, mount: SandboxMount): string[] {
  const problem = mountProblem(engine, mount);
  if (problem) throw new Error(problem);
  const mode = mount.readOnly ? "ro" : "rw";
  if (engine === "podman") return ["-v", `${mount.host}:${mount.target}:${mode},${MOUNT_OPTIONS}`];
  const fields = [
    "type=volume",
    `dst=${mount.target}`,
    "volume-driver=local",
    "volume-opt=type=none",
    `volume-opt=device=${mount.host}`,
    `volume-opt=o=bind,${mode},${MOUNT_OPTIONS}`,
  ];
  return ["--mount", fields.map(csvField).join(",")];
}

/** One field of docker's CSV `--mount` syntax, quoted when it holds a comma or a quote. */
function csvField(field: string): string {
  return /[",\n\r]/.test(field) ? `"${field.replaceAll('"', '""')}"` : field;
}

/** Resolves plugin options and limits into a run config; `cgroupLimits` is false where the engine cannot
 * apply memory and pids limits (rootless on cgroup v1), so ulimits stand in for them; `seccomp` is the
 * profile file's path. */
export function runConfigFor(
  engine: OciEngine,
  options: OciOptions,
  limits: SandboxLimits,
  cgroupLimits: boolean,
  seccomp?: string,
): OciRunConfig {
  return {
    engine,
    runtime: options.runtime,
    init: options.init ?? true,
    nofile: options.nofile ?? 1024,
    // RLIMIT_NPROC counts every process of the sandbox uid on the host (or user namespace), not per
    // container: leave headroom for other sandboxes where the pids cgroup caps each one, and make it the
    // cap itself where cgroup limits are not applied.
    nproc: options.nproc ?? (cgroupLimits ? limits.pids * 4 : limits.pids),
    tmpfsSize: options.tmpfsSize ?? "256m",
    dataLimit: cgroupLimits ? undefined : parseMemory(limits.memory),
    seccomp,
    extraArgs: options.extraArgs ?? [],
    // docker and nerdctl hand stdio to a daemon, so an fd of ours cannot reach the container.
    channel: engine === "podman" && (options.directChannel ?? true),
  };
}

/** Facts about the engine on this machine, read once from `info`. */
interface EngineFacts {
  installed: boolean;
  version?: string;
  rootless?: boolean;
  /** Whether memory and pids limits are applied (not on rootless cgroup v1 hosts). */
  cgroupLimits: boolean;
  problem?: Problem;
}

/** Reads the version, rootless mode and cgroup version from an engine's `info` JSON. */
export function parseEngineInfo(engine: OciEngine, json: string): Omit<EngineFacts, "installed"> {
  const info = JSON.parse(json);
  if (engine === "podman") {
    const rootless = Boolean(info.host?.security?.rootless);
    return {
      version: info.version?.Version,
      rootless,
      cgroupLimits: !(rootless && info.host?.cgroupVersion === "v1"),
    };
  }
  const rootless = (info.SecurityOptions ?? []).some((option: string) => option.includes("rootless"));
  return {
    version: info.ServerVersion,
    rootless,
    cgroupLimits: !(rootless && String(info.CgroupVersion) === "1"),
  };
}

// Image config for an imported root filesystem. The root is read-only and nobody's home does not exist,
// so matplotlib gets a config directory on the /tmp tmpfs instead of warning on every import.
const IMAGE_CONFIG = [
  "ENV LANG=C.UTF-8",
  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  "ENV MPLCONFIGDIR=/tmp/matplotlib",
  "WORKDIR /workspace",
  'CMD ["python3"]',
];
const DEFAULT_LIMITS: SandboxLimits = { memory: "512m", pids: 128 };
const INFO_ARGS: Record<OciEngine, string[]> = {
  podman: ["info", "--format", "json"],
  docker: ["info", "--format", "{{json .}}"],
  nerdctl: ["info", "--format", "{{json .}}"],
};

/** Creates a runtime plugin (with an image store) that drives the given engine's CLI. */
export function ociRuntime(
  engine: OciEngine,
  options: OciOptions & Required<Pick<OciOptions, "command">>,
): RuntimePlugin & ImageStore {
  const cli = options.command;
  const image = options.image ?? DEFAULT_IMAGE;
  let facts: Promise<EngineFacts> | undefined;
  /** The facts when they came from a cached verdict (adopt()) rather than from `info`. */
  let adopted: Promise<EngineFacts> | undefined;

  // Removals that failed (engine binary missing or broken), retried until they succeed.
  const pending = new PendingRemovals(remove);
  const run = async (args: string[], timeoutMs = 30_000, proxies = false) => {
    const result = await execCli([...cli, ...args], { timeoutMs, proxies });
    // The engine works again: the removals that failed while it did not need not wait for their timer.
    if (result.code === 0) void pending.retry();
    return result;
  };

  function engineFacts(): Promise<EngineFacts> {
    return facts ??= (async () => {
      const result = await run(INFO_ARGS[engine], 15_000);
      if (result.spawnError) {
        facts = undefined; // installing the engine later should not need a restart
        return {
          installed: false,
          cgroupLimits: true,
          problem: diagnose(engine, result.stderr, result.spawnError),
        };
      }
      try {
        const parsed = parseEngineInfo(engine, result.stdout);
        if (result.code === 0 && parsed.version) return { installed: true, ...parsed };
      } catch {
        // fall through: not JSON, the engine said why on stderr
      }
      facts = undefined;
      return { installed: true, cgroupLimits: true, problem: diagnose(engine, result.stderr) };
    })();
  }

  // Checked at every start (a read of a small file): a temp cleaner may have removed it since the last one.
  const seccompPath = () => seccompProfilePath(options.seccomp);

  async function remove(name: string): Promise<void> {
    // podman's rm -f waits 10 s for SIGTERM first, which hostile code ignores.
    // -v: docker's mounts are anonymous volumes, which only go with the container when asked to.
    const args = engine === "podman" ? ["rm", "-f", "-t", "0", name] : ["rm", "-f", "-v", name];
    const result = await run(args);
    if (result.code !== 0 && !/no such container|not found|no such object/i.test(result.stderr)) {
      throw new Error(`Cannot remove container "${name}" with ${engine}: ${firstErrorLine(result.stderr)}`);
    }
  }

  const removeOrRetry = (name: string) => remove(name).catch((error) => pending.add(name, error));

  async function start(start: SandboxStartOptions): Promise<SandboxProcess> {
    const refused = (start.mounts ?? []).map((m) => mountProblem(engine, m)).find(Boolean);
    if (refused) throw new Error(refused);
    const [known, seccomp] = await Promise.all([engineFacts(), seccompPath()]);
    const config = runConfigFor(engine, options, start.limits, known.cgroupLimits, seccomp);
    const args = buildRunArgs(start, config);
    const child = spawn(cli[0], [...cli.slice(1), ...args], {
      cwd: "/",
      env: engineEnv(),
      // A fourth "pipe" is a socket pair on POSIX: a duplex channel the container gets as fd 3.
      stdio: config.channel ? ["pipe", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => (void pending.retry(), resolve()));
      child.once("error", (error: NodeJS.ErrnoException) => {
        const problem = diagnose(engine, error.message, error.code);
        const fix = problem.fix ? `: ${problem.fix}` : "";
        reject(new Error(`Cannot start sandbox "${start.name}": ${problem.message}${fix}`));
      });
    });
    // A write after the sandbox died must reject the writer, not crash the host with an unhandled 'error'.
    child.stdin.on("error", () => {});
    let ended = false;
    const exited = new Promise<number | null>((resolve) => {
      child.once("exit", (code) => {
        ended = true;
        resolve(code);
      });
    });
    // Whether the client ended within `ms`; the timer is cleared so it cannot hold the host process open.
    const wait = (ms: number) =>
      new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        exited.then(() => (clearTimeout(timer), resolve(true)));
      });
    let killing: Promise<void> | undefined;
    const kill = () =>
      killing ??= (async () => {
        // Killing only the client would leave the container running under conmon or the daemon. An rm
        // that comes while the engine is still creating the container finds nothing, so repeat it until
        // the client ends; stop the client itself only as a last resort.
        for (let attempt = 0; attempt < 6 && !ended; attempt++) {
          await remove(start.name).catch(() => {});
          if (await wait(attempt === 0 ? 500 : 300)) return;
        }
        // The container outlives its client (conmon or the daemon keeps it), so a removal that fails now
        // is retried until the engine works again.
        child.kill("SIGKILL");
        await wait(2_000);
        await removeOrRetry(start.name);
      })();
    const socket = child.stdio[3] as Duplex | null | undefined;
    socket?.on("error", () => {});
    return {
      stdin: Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
      stdout: Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
      stderr: Readable.toWeb(child.stderr) as ReadableStream<Uint8Array>,
      ...(socket
        ? {
          channel: {
            fd: 3,
            readable: Readable.toWeb(socket) as ReadableStream<Uint8Array>,
            writable: Writable.toWeb(socket) as WritableStream<Uint8Array>,
          },
        }
        : {}),
      kill,
      exited,
    };
  }

  async function listManaged(): Promise<ManagedSandbox[]> {
    const ps = await run(["ps", "-a", "-q", "--no-trunc", "--filter", `label=${MANAGED_LABEL}=true`]);
    if (ps.code !== 0) return [];
    const ids = ps.stdout.split("\n").map((id) => id.trim()).filter(Boolean);
    if (ids.length === 0) return [];
    // inspect, not ps: ps prints docker's labels as one ambiguous "k=v,k=v" string.
    const inspect = await run(["inspect", "--format", "{{json .Name}} {{json .Config.Labels}}", ...ids]);
    return parseInspectLines(inspect.stdout);
  }

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

  async function detect(): Promise<RuntimeDetection> {
    // Detection is asked afresh: facts adopted from a cached verdict don't count.
    if (adopted) facts = adopted = undefined;
    const [known, lookup] = await Promise.all([engineFacts(), lookUpImage(image)]);
    const detection: RuntimeDetection = {
      name: engine,
      available: false,
      version: known.version,
      rootless: known.rootless,
      problems: known.problem ? [known.problem] : [],
    };
    if (!known.version) return detection;
    detection.facts = { cgroupLimits: known.cgroupLimits };
    if (!known.cgroupLimits) {
      detection.problems.push({
        message:
          `Rootless ${engine} on cgroup v1 cannot apply memory and pids limits; ulimits (nproc, data) stand in`,
        fix: "For cgroup limits use cgroup v2 (systemd.unified_cgroup_hierarchy=1) or a rootful engine",
      });
    }
    if (lookup.problem) {
      detection.problems.push(lookup.problem);
      return detection;
    }
    if (!lookup.found) {
      const tag = image === DEFAULT_IMAGE ? "" : ` --tag ${image}`;
      detection.problems.push({
        message: `The sandbox image "${image}" is missing`,
        fix: `Build it: codemode image build --runtime ${engine}${tag}`,
      });
      return detection;
    }
    let seccomp: string | undefined;
    try {
      seccomp = await seccompPath();
    } catch (error) {
      detection.problems.push(
        (error as SeccompProfileError).problem ?? { message: (error as Error).message },
      );
      return detection;
    }
    // Only a real container shows runtime, cgroup, ulimit and seccomp failures; it takes a fraction of a
    // second.
    const probeName = `codemode-probe-${process.pid}-${randomBytes(4).toString("hex")}`;
    const probe = buildRunArgs(
      {
        name: probeName,
        image,
        command: ["python3", "-c", "pass"],
        limits: DEFAULT_LIMITS,
        labels: { "codemode.probe": "true" },
      },
      // The probe runs without a channel fd to pass; sessions exercise that.
      { ...runConfigFor(engine, options, DEFAULT_LIMITS, known.cgroupLimits, seccomp), channel: false },
    );
    const result = await run(probe, 30_000);
    if (result.code === 0) {
      detection.available = true;
    } else {
      detection.problems.push(diagnose(engine, result.stderr, result.spawnError));
      await removeOrRetry(probeName);
    }
    return detection;
  }

  /**
   * What the verdict rests on: each engine binary's path, size and mtime, the variables that choose the
   * engine, the image's id, the OCI runtime and the seccomp choice. Undefined when the engine can't say
   * whether it has the image (a daemon that is down): then detection runs.
   */
  async function fingerprint(): Promise<string | undefined> {
    const binaries = await Promise.all(
      cli.filter((arg, i) => i === 0 || arg === engine).map(async (name) => {
        const path = whichSync(name, engineEnv().PATH);
        const s = path ? await stat(path).catch(() => undefined) : undefined;
        return s ? `${path} ${s.size} ${s.mtimeMs}` : `${name} not found`;
      }),
    );
    let imageId = "none";
    if (!binaries.some((b) => b.endsWith(" not found"))) {
      const inspect = await run(["image", "inspect", "--format", "{{.Id}}", image], 15_000);
      if (inspect.code === 0) imageId = inspect.stdout.trim();
      else if (!/no such image|image not known|not found/i.test(inspect.stderr)) return undefined;
    }
    const env = createHash("sha256").update(engineChoiceEnv()).digest("hex").slice(0, 16);
    const seccomp = options.seccomp && !["codemode", "engine"].includes(options.seccomp)
      ? await stat(options.seccomp).then(
        (s) => `${options.seccomp} ${s.size} ${s.mtimeMs}`,
        () => options.seccomp,
      )
      : options.seccomp ?? "codemode";
    return [
      `${engine}: ${binaries.join(", ")}`,
      `env ${env}`,
      `image ${image} ${imageId}`,
      `oci runtime ${options.runtime ?? "default"}`,
      `seccomp ${seccomp}`,
    ].join("; ");
  }

  /** A cached "works" verdict: start() uses its facts instead of asking the engine for them again. */
  function adopt(detection: RuntimeDetection): void {
    if (!detection.available || !detection.version) return;
    facts = adopted = Promise.resolve({
      installed: true,
      version: detection.version,
      rootless: detection.rootless,
      cgroupLimits: detection.facts?.cgroupLimits !== false,
    });
  }

  return {
    name: engine,
    ...(engine === "nerdctl" ? {} : { mountMode: "bind" as const }),
    mountProblem: (mount) => mountProblem(engine, mount),
    detect,
    fingerprint,
    adopt,
    start,
    listManaged,
    remove,
    settle: (timeoutMs) => pending.flush(timeoutMs),
    imageExists,
    importImage,
    imageLabels,
    pullImage: (ref) => checked(`pull "${ref}"`, ["pull", ref], 1_800_000, true),
    tagImage: (source, target) => checked(`tag "${source}" as "${target}"`, ["tag", source, target], 60_000),
  };
}
