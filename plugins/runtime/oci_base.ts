/**
 * The shared base of the OCI-CLI runtimes (podman, docker, nerdctl): one pure function builds the hardened
 * `run` argument list, and one factory turns an engine CLI into a runtime plugin with an image store.
 * @module
 */

import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import process from "node:process";
import { type Duplex, Readable, Writable } from "node:stream";
import type {
  ImageStore,
  IsolationEvidence,
  ManagedSandbox,
  Problem,
  RuntimeDetection,
  RuntimePlugin,
  SandboxLimits,
  SandboxProcess,
  SandboxStartOptions,
} from "../../core/contracts/runtime.ts";
import { DEFAULT_IMAGE } from "../../core/sandbox/image_build.ts";
import {
  diagnose,
  engineChoiceEnv,
  engineEnv,
  type EngineFacts,
  execCli,
  firstErrorLine,
  type OciEngine,
  parseEngineInfo,
  parseInspectLines,
  type ProblemError,
} from "./_oci_exec.ts";
import { whichSync } from "./_executable.ts";
import { buildRunArgs, MANAGED_LABEL, type OciOptions, runConfigFor } from "./_oci_args.ts";
import { ociImages } from "./_oci_images.ts";
import { mountProblem } from "./_oci_mounts.ts";
import { PendingRemovals } from "./_pending_removals.ts";
import { seccompProfilePath } from "./seccomp.ts";
import {
  containerEvidence,
  diagnoseGvisor,
  findRunsc,
  gvisorEvidence,
  gvisorRuntimeFor,
  resolveGvisor,
  runscPassesFds,
} from "./gvisor.ts";

export type { OciEngine } from "./_oci_exec.ts";
export { parseEngineInfo } from "./_oci_exec.ts";
export { MOUNT_OPTIONS, mountArgs, mountProblem } from "./_oci_mounts.ts";
export {
  buildRunArgs,
  ISOLATION_LABEL,
  MANAGED_LABEL,
  type OciOptions,
  type OciRunConfig,
  runConfigFor,
} from "./_oci_args.ts";

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
  const seccompPath = () => seccompProfilePath(options.seccomp, undefined, { gvisor: Boolean(gvisor) });

  const gvisor = options.isolation === "gvisor" ? resolveGvisor(options.gvisor) : undefined;
  /** Whether this runsc takes `--preserve-fds` (learned by detection; runsc 2022-12 does not). */
  let gvisorChannel = false;
  // Looked up at every start (a stat): runsc may be gone since detection. Throws the finding.
  const gvisorRuntime = (known: EngineFacts) =>
    gvisor && gvisorRuntimeFor(engine, gvisor, known, gvisorChannel);

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
    const config = runConfigFor(
      engine,
      options,
      start.limits,
      known.cgroupLimits,
      seccomp,
      gvisorRuntime(known),
    );
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
          channel: { fd: 3, socket },
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

  const images = ociImages(engine, run);
  const lookUpImage = images.lookUpImage;

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
    let gvisorConfig: ReturnType<typeof gvisorRuntime>;
    try {
      gvisorConfig = gvisorRuntime(known);
    } catch (error) {
      detection.problems.push(problemOf(error));
      return detection;
    }
    if (gvisorConfig && engine === "podman") {
      gvisorChannel = await runscPassesFds(gvisorConfig.runtime);
      detection.facts.gvisorChannel = gvisorChannel;
    }
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
      detection.problems.push(problemOf(error));
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
      {
        ...runConfigFor(engine, options, DEFAULT_LIMITS, known.cgroupLimits, seccomp, gvisorConfig),
        channel: false,
      },
    );
    const result = await run(probe, 30_000);
    if (result.code === 0) {
      detection.available = true;
    } else {
      detection.problems.push(
        (gvisor && diagnoseGvisor(result.stderr, gvisor.platform)) ??
          diagnose(engine, result.stderr, result.spawnError),
      );
      await removeOrRetry(probeName);
    }
    return detection;
  }

  /**
   * What the verdict rests on: each engine binary's path, size and mtime, the variables that choose the
   * engine, the image's id, the OCI runtime (runsc's binary and flags under gVisor) and the seccomp choice.
   * Undefined when the engine can't say whether it has the image (a daemon that is down): then detection
   * runs.
   */
  async function fingerprint(): Promise<string | undefined> {
    const stamp = async (path: string) => {
      const s = await stat(path).catch(() => undefined);
      return s && `${path} ${s.size} ${s.mtimeMs}`;
    };
    const binaries = await Promise.all(
      cli.filter((arg, i) => i === 0 || arg === engine).map(async (name) => {
        const path = whichSync(name, engineEnv().PATH);
        return (path && await stamp(path)) || `${name} not found`;
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
      ? await stamp(options.seccomp) ?? options.seccomp
      : options.seccomp ?? "codemode";
    const runsc = gvisor && findRunsc(gvisor.runsc, engineEnv().PATH).path;
    const runtime = gvisor
      ? `gvisor ${runsc && await stamp(runsc) || "runsc not found"} platform ${gvisor.platform}` +
        (engine === "docker" ? ` as ${gvisor.dockerRuntime}` : "")
      : options.runtime ?? "default";
    return [
      `${engine}: ${binaries.join(", ")}`,
      `env ${env}`,
      `image ${image} ${imageId}`,
      `oci runtime ${runtime}`,
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
    gvisorChannel = detection.facts?.gvisorChannel === true;
  }

  /** What the host shows of running sandbox `name`: the engine's record of its runtime and the process. */
  async function inspectIsolation(name: string): Promise<IsolationEvidence> {
    const runtimeField = engine === "docker" ? "{{.HostConfig.Runtime}}" : "{{.OCIRuntime}}";
    const result = await run(["inspect", "--format", `${runtimeField} {{.State.Pid}}`, name], 15_000);
    const [runtime = "", pid = ""] = result.stdout.trim().split(/\s+/);
    // The engine's state pid is the process behind the container on this host (runsc's sandbox under
    // gVisor); a remote engine's pid means nothing here, and the read fails.
    const cmdline = /^[1-9]\d*$/.test(pid)
      ? await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
      : "";
    const view = { engine, runtime, cmdline };
    if (!gvisor) return containerEvidence(view);
    const expected = engine === "docker"
      ? gvisor.dockerRuntime
      : findRunsc(gvisor.runsc, engineEnv().PATH).path ?? gvisor.runsc;
    return gvisorEvidence(view, { runtime: expected, platform: gvisor.platform });
  }

  return {
    name: engine,
    isolation: gvisor ? "gvisor" : "container",
    ...(engine === "nerdctl" ? {} : { mountMode: "bind" as const }),
    mountProblem: (mount) => mountProblem(engine, mount),
    detect,
    fingerprint,
    adopt,
    start,
    listManaged,
    remove,
    settle: (timeoutMs) => pending.flush(timeoutMs),
    inspectIsolation,
    imageExists: images.imageExists,
    importImage: images.importImage,
    imageLabels: images.imageLabels,
    pullImage: images.pullImage,
    tagImage: images.tagImage,
  };
}

/** The problem an error carries (ProblemError), or one made of its message. */
function problemOf(error: unknown): Problem {
  return (error as ProblemError).problem ?? { message: (error as Error).message ?? String(error) };
}
