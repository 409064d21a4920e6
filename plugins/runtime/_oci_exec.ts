/**
 * Internals of the OCI runtime plugins: running the engine CLI, the environment it gets, and turning
 * its error messages into problems with fixes.
 * @module
 */

import { spawn } from "node:child_process";
import process from "node:process";
import type { ManagedSandbox, Problem } from "../../core/contracts/runtime.ts";

/** The engines the OCI base knows how to drive. */
export type OciEngine = "podman" | "docker" | "nerdctl";

/** An error that carries the problem doctor and `detect()` report, with its fix. */
export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.fix ? `${problem.message}: ${problem.fix}` : problem.message);
    this.name = "ProblemError";
  }
}

/** What one engine CLI call returned. `code` is -1 when the CLI could not be started at all. */
export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
  /** The spawn error code ("ENOENT") when the CLI could not be started. */
  spawnError?: string;
}

// The engine CLI needs to find its socket, storage and config; nothing else from the host, and above all no
// secrets, reaches it (and so cannot reach the container, whatever the engine's own env defaults are).
const ENGINE_ENV_KEYS = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "TMPDIR",
  "XDG_RUNTIME_DIR",
  "XDG_CONFIG_HOME",
  "XDG_DATA_HOME",
  "DOCKER_HOST",
  "DOCKER_CONTEXT",
  "DOCKER_CONFIG",
  "DOCKER_CERT_PATH",
  "DOCKER_TLS_VERIFY",
  "CONTAINER_HOST",
  "CONTAINER_CONNECTION",
  "CONTAINERS_CONF",
  "CONTAINERS_STORAGE_CONF",
  "CONTAINERS_REGISTRIES_CONF",
  "REGISTRY_AUTH_FILE",
  "CONTAINERD_ADDRESS",
  "CONTAINERD_NAMESPACE",
  "NERDCTL_TOML",
];
// Of those, the ones that choose which engine (daemon, socket, configuration) the CLI talks to.
const ENGINE_CHOICE_KEYS = ENGINE_ENV_KEYS.filter((key) => /^(DOCKER|CONTAINER|NERDCTL|XDG)_/.test(key));
// Pulling from a registry goes through the machine's proxy, so image commands also get these.
const PROXY_ENV_KEYS = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"];

/** The environment for the engine CLI: an allow-list of the host's variables, proxies only when pulling. */
export function engineEnv(
  source: Record<string, string | undefined> = process.env,
  options: { proxies?: boolean } = {},
): Record<string, string> {
  const keys = options.proxies ? [...ENGINE_ENV_KEYS, ...PROXY_ENV_KEYS] : ENGINE_ENV_KEYS;
  const env: Record<string, string> = {};
  for (const key of keys) {
    const value = source[key];
    if (value !== undefined) env[key] = value;
  }
  env.PATH ??= "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  return env;
}

/** Runs `argv` to completion with a time limit, collecting its output. Never rejects. */
export function execCli(
  argv: string[],
  options: { timeoutMs?: number; proxies?: boolean } = {},
): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), {
      cwd: "/",
      env: engineEnv(process.env, options),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => stdout += chunk);
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => stderr += chunk);
    const timer = options.timeoutMs
      ? setTimeout(() => {
        stderr += `\nTimed out after ${options.timeoutMs} ms`;
        child.kill("SIGKILL");
      }, options.timeoutMs)
      : undefined;
    child.on("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: error.message, spawnError: error.code ?? "ERROR" });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

/** Parses lines of `inspect --format '{{json .Name}} {{json .Config.Labels}}'` (podman, docker, nerdctl). */
export function parseInspectLines(text: string): ManagedSandbox[] {
  const found: ManagedSandbox[] = [];
  for (const line of text.split("\n")) {
    const match = /^(".*?(?<!\\)")\s+(.*)$/.exec(line.trim());
    if (!match) continue;
    try {
      const name = String(JSON.parse(match[1])).replace(/^\//, "");
      const labels = JSON.parse(match[2]) as Record<string, string> | null;
      if (name) found.push({ name, labels: labels ?? {} });
    } catch {
      // A container removed between `ps` and `inspect` leaves an error line, not JSON; skip it.
    }
  }
  return found;
}

/** Parses a memory size in the engines' syntax ("512m", "1g", "1048576") into bytes. */
export function parseMemory(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([bkmg]?)b?$/i.exec(value.trim());
  if (!match) {
    throw new RangeError(`Invalid memory size "${value}": use a number with an optional unit, like "512m"`);
  }
  const scale = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[match[2].toLowerCase()] ?? 1;
  return Math.floor(Number(match[1]) * scale);
}

/** The first meaningful line of an engine's error output. */
export function firstErrorLine(stderr: string): string {
  const lines = stderr.split("\n").map((line) => line.trim()).filter(Boolean);
  const error = lines.find((line) => /error/i.test(line)) ?? lines[0] ?? "no error output";
  return error.replace(/^Error(?: response from daemon)?:\s*/i, "");
}

/** Turns an engine failure into a problem with a fix, for the failures seen on real machines. */
export function diagnose(engine: string, stderr: string, spawnError?: string): Problem {
  const timedOut = /\nTimed out after (\d+) ms$/.exec(stderr);
  if (timedOut) {
    return {
      message: `${engine} did not answer within ${Number(timedOut[1]) / 1000} s`,
      fix: "The machine or the engine is busy (another command may hold its lock); codemode asks again " +
        "at the next run",
      transient: true,
    };
  }
  if (spawnError === "ENOENT") {
    return {
      message: `${engine} is not installed`,
      fix: `Install it (Debian: apt-get install ${
        engine === "docker" ? "docker.io" : engine
      }) or choose another runtime`,
    };
  }
  if (/cgroups? in hybrid mode/i.test(stderr)) {
    return {
      message: `The OCI runtime crun cannot run containers on this machine (cgroups in hybrid mode)`,
      fix: `Use runc: apt-get install runc, then pass runtime "runc" to the ${engine} plugin or set ` +
        `runtime = "runc" under [engine] in /etc/containers/containers.conf`,
    };
  }
  if (/rlimit.*(operation not permitted|permission denied)/i.test(stderr)) {
    return {
      message: `The sandbox's ulimits exceed this machine's hard limits: "${firstErrorLine(stderr)}"`,
      fix: "Lower the nofile/nproc plugin options below `ulimit -Hn` and `ulimit -Hu`",
    };
  }
  if (/cannot connect to the docker daemon|is the docker daemon running/i.test(stderr)) {
    return {
      message: "The Docker daemon is not running",
      fix: "Start it: systemctl start docker (without systemd: dockerd >/var/log/dockerd.log 2>&1 &)",
    };
  }
  if (/permission denied.*(docker|containerd)\.sock/i.test(stderr)) {
    return {
      message: `This user may not use the ${engine} daemon socket`,
      fix: `Add the user to the ${engine} group (usermod -aG docker "$USER") and log in again`,
    };
  }
  if (/executable file not found|no such file or directory.*runc|runtime.*not found/i.test(stderr)) {
    return {
      message: `The OCI runtime is missing: "${firstErrorLine(stderr)}"`,
      fix: "Install runc (apt-get install runc) or pass the runtime option of an installed one",
    };
  }
  if (
    /image not known|no such image|unable to find image|not found: manifest|failed to resolve/i.test(stderr)
  ) {
    return {
      message: "The sandbox image is missing",
      fix: `Build it: codemode image build --runtime ${engine}`,
    };
  }
  return { message: `${engine} failed: "${firstErrorLine(stderr)}"` };
}

/** The variables that choose which engine the CLI talks to, as `KEY=value` lines (for cache keys). */
export function engineChoiceEnv(source: Record<string, string | undefined> = process.env): string {
  return ENGINE_CHOICE_KEYS.filter((key) => source[key] !== undefined).map((key) => `${key}=${source[key]}`)
    .join("\n");
}

/** One entry of docker's table of OCI runtimes, as `docker info` shows it. */
export interface DockerRuntimeEntry {
  path?: string;
  runtimeArgs?: string[];
}

/** Facts about the engine on this machine, read once from `info`. */
export interface EngineFacts {
  installed: boolean;
  version?: string;
  rootless?: boolean;
  /** Whether memory and pids limits are applied (not on rootless cgroup v1 hosts). */
  cgroupLimits: boolean;
  /** docker's table of OCI runtimes (name -> path and flags). */
  runtimes?: Record<string, DockerRuntimeEntry>;
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
    ...(info.Runtimes && typeof info.Runtimes === "object" ? { runtimes: info.Runtimes } : {}),
  };
}
