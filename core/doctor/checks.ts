/**
 * `codemode doctor` as data: runtimes, the sandbox image, the state directory, config files, servers, the
 * effective settings and policy, each with a status and one fix per problem. Nothing here prints; the CLI
 * renders the report as tables or JSON.
 * @module
 */
import { access, constants, mkdtemp, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Diagnostic, Provenance, ServerSpec } from "../contracts/discovery.ts";
import {
  type IsolationSetting,
  type Problem,
  type RuntimePlugin,
  servesIsolation,
} from "../contracts/runtime.ts";
import type { SettingKey } from "../config/settings.ts";
import type { ConfigFile, ConfigFileError } from "../config/file.ts";
import { checkStateStamp, readStateStamp, type StateStamp } from "../config/state_stamp.ts";
import { type InstallKind, VERSION } from "../version.ts";
import {
  checkConfigFile,
  checkPolicy,
  checkSettings,
  type ConfigFileCheck,
  type PolicyCheck,
  type SettingCheck,
} from "./config.ts";
import { checkRuntime, type RuntimeCheck, type RuntimeCheckOptions } from "./runtime.ts";
import type { IsolationCheck } from "./isolation.ts";
import type { CheckStatus, Finding } from "./finding.ts";
import { skillFindings, type SkillsCheck } from "./skills.ts";
import { checkMounts, type MountCheck, mountFindings } from "./mounts.ts";
import { checkTracing, type CollectorProbe, type TracingCheck, tracingFindings } from "./tracing.ts";
import { loginCommand } from "../auth/needs_login.ts";
import type { AuthState } from "../auth/server_auth.ts";

export type { CheckStatus, Finding } from "./finding.ts";
export type { RuntimeCheck, SandboxProbe } from "./runtime.ts";
export type { IsolationCheck } from "./isolation.ts";
export type { MountCheck } from "./mounts.ts";
export type { TracingCheck } from "./tracing.ts";
export { checkSkills, type SkillsCheck } from "./skills.ts";
export {
  checkSettings,
  type ConfigFileCheck,
  type PolicyCheck,
  type PolicyRuleCheck,
  type SettingCheck,
} from "./config.ts";

/** The state directory: where caches and unpacked assets live. */
export interface StateDirCheck {
  path: string;
  exists: boolean;
  writable: boolean;
  status: CheckStatus;
  /** The directory's stamp: its format and the codemode that wrote it (absent until first use). */
  stamp?: StateStamp;
  problem?: Problem;
}

/** One config file (or a discovery problem not tied to a read file). */
export interface ConfigCheck {
  path: string;
  plugin?: string;
  /** Names of the servers this file defines. */
  servers: string[];
  diagnostics: Diagnostic[];
  status: CheckStatus;
}

/** One configured server, started and listed unless the check was quick. */
export interface ServerCheck {
  name: string;
  source: string;
  status: CheckStatus;
  /** Milliseconds to start it and list its tools. */
  ms?: number;
  tools?: number;
  /** Tools of its listing left out (or kept with a caveat) under codemode's caps, and why. */
  toolProblems?: ListedToolProblem[];
  /** A remote server codemode logs in to with OAuth: whether it holds working credentials. */
  auth?: AuthState;
  problem?: Problem;
}

/** One tool of a server's listing that codemode left out (or kept with a caveat). */
export interface ListedToolProblem {
  tool: string;
  problem: string;
  leftOut: boolean;
}

/** A server's listing as doctor reads it: its tools, or its tools and the problems of those left out. */
export type ServerListing = unknown[] | { tools: unknown[]; problems?: ListedToolProblem[] };

/** What is known about a remote server's login. */
export interface AuthFacts {
  auth: AuthState;
  problem?: string;
}

/** Everything doctor found. `ok` is false when something is broken (a "fail" finding). */
export interface DoctorReport {
  version: string;
  /** How this codemode was installed: "npm", "binary" or "checkout". */
  install?: InstallKind;
  ok: boolean;
  /** The runtime codemode would use, when one works. */
  runtime?: string;
  /** Why that one: the setting that names it, or what `auto` skipped on the way to it. */
  runtimeReason?: string;
  /** CODEMODE_ISOLATION, and what the probe sandbox of the runtime in use proved about it. */
  isolation: { setting: IsolationSetting; proof?: IsolationCheck };
  runtimes: RuntimeCheck[];
  stateDir: StateDirCheck;
  /** codemode's own config file (settings and policy). */
  configFile: ConfigFileCheck;
  /** MCP client config files (where servers come from). */
  configs: ConfigCheck[];
  servers: ServerCheck[];
  settings: SettingCheck[];
  policy: PolicyCheck;
  /** Host folders the sandbox sees, and how the runtime in use brings them in. */
  mounts: MountCheck[];
  /** Skill directories and skills that failed to load (absent when the caller did not check them). */
  skills?: SkillsCheck;
  /** Whether runs are traced, and whether the collector answered. */
  tracing: TracingCheck;
  findings: Finding[];
}

/** What discovery found, as doctor reads it. */
export interface DiscoveryFacts {
  servers: ServerSpec[];
  skipped: { name: string; source: Provenance; reason: string }[];
  diagnostics: Diagnostic[];
  files: { plugin: string; path: string; servers: number }[];
}

/** Inputs of {@link runDoctor}; the CLI wires the real ones, tests pass fakes. */
export interface DoctorInput {
  version: string;
  install?: InstallKind;
  env: Record<string, string | undefined>;
  runtimes: RuntimePlugin[];
  discovery: DiscoveryFacts;
  /** Starts one server and lists its tools; undefined skips servers (`--quick`). */
  listTools?: (server: string) => Promise<ServerListing>;
  /**
   * A remote server's login: after `listTools` ran (`started`), what it left; otherwise found out with
   * one request. Undefined for a server codemode does no OAuth for.
   */
  authOf?: (server: string, started: boolean) => Promise<AuthFacts | undefined>;
  sandbox: Pick<RuntimeCheckOptions, "command" | "bootstrap" | "detected">;
  serverTimeoutMs?: number;
  /** codemode's config file: the one read, the error reading it, or undefined when there is none. */
  configFile?: ConfigFile | ConfigFileError;
  /** Where the config file was looked for. */
  configSearched?: string[];
  /** The skills check, made by the caller from the loaded skills. */
  skills?: SkillsCheck;
  /** Asks the OTLP collector whether it takes an export (default: a real export of no spans). */
  probeCollector?: CollectorProbe;
}

/**
 * Whether the state directory exists and is writable (or can be created), and whether this codemode
 * (`version`) can read it: one a newer codemode wrote in a newer format fails. Never throws.
 */
export async function checkStateDir(path: string, version = VERSION): Promise<StateDirCheck> {
  const check = await checkStateDirAccess(path);
  const stamp = await readStateStamp(path).catch(() => undefined);
  if (!stamp) return check;
  try {
    checkStateStamp(path, stamp, version);
    return { ...check, stamp };
  } catch (error) {
    return {
      ...check,
      stamp,
      status: "fail",
      problem: { message: (error as Error).message, fix: "Upgrade codemode, or set CODEMODE_STATE_DIR" },
    };
  }
}

async function checkStateDirAccess(path: string): Promise<StateDirCheck> {
  const info = await stat(path).catch(() => undefined);
  const exists = Boolean(info);
  let writable = false;
  if (info && !info.isDirectory()) {
    writable = false;
  } else if (exists) {
    writable = await mkdtemp(join(path, ".doctor-")).then(
      (dir) => rm(dir, { recursive: true }).then(() => true),
      () => false,
    );
  } else {
    // The nearest existing ancestor decides: it must be a directory we may write to.
    let parent = dirname(path);
    let kind = await stat(parent).catch(() => undefined);
    while (!kind && parent !== dirname(parent)) {
      kind = await stat(parent = dirname(parent)).catch(() => undefined);
    }
    writable = Boolean(kind?.isDirectory()) &&
      await access(parent, constants.W_OK).then(() => true, () => false);
  }
  if (writable) {
    return {
      path,
      exists,
      writable,
      status: "ok",
      ...(exists ? {} : { problem: { message: "Does not exist yet; it is created on first use" } }),
    };
  }
  return {
    path,
    exists,
    writable,
    status: "warn",
    problem: {
      message: info && !info.isDirectory()
        ? `The state directory "${path}" is not a directory`
        : exists
        ? `The state directory "${path}" is not writable`
        : `The state directory "${path}" cannot be created`,
      fix: "Set CODEMODE_STATE_DIR to a writable directory (caches and unpacked assets live there)",
    },
  };
}

/** One check per config file read, with its servers and diagnostics; plus problems not tied to a file. */
export function checkConfigs(discovery: DiscoveryFacts): ConfigCheck[] {
  const definedIn = (path: string) => {
    const sources = [
      ...discovery.servers.flatMap((
        s,
      ) => [
        { name: s.name, source: s.source },
        ...(s.shadowed ?? []).map((p) => ({ name: s.name, source: p })),
      ]),
      ...discovery.skipped,
    ];
    return [...new Set(sources.filter((s) => s.source.file === path).map((s) => s.name))];
  };
  const status = (diagnostics: Diagnostic[]): CheckStatus =>
    diagnostics.some((d) => d.severity === "error") ? "fail" : diagnostics.length ? "warn" : "ok";
  const checks = discovery.files.map((file): ConfigCheck => {
    const diagnostics = discovery.diagnostics.filter((d) => d.file === file.path);
    return {
      path: file.path,
      plugin: file.plugin,
      servers: definedIn(file.path),
      diagnostics,
      status: status(diagnostics),
    };
  });
  const read = new Set(discovery.files.map((f) => f.path));
  for (
    const [path, diagnostics] of groupBy(
      discovery.diagnostics.filter((d) => !read.has(d.file)),
      (d) => d.file,
    )
  ) {
    checks.push({ path, servers: [], diagnostics, status: status(diagnostics) });
  }
  return checks;
}

/**
 * Starts and lists every server in parallel (or, without `listTools`, only lists them); servers in
 * `refused` (name -> the policy's reason) are never started. Never throws.
 */
export async function checkServers(
  discovery: DiscoveryFacts,
  listTools: ((server: string) => Promise<ServerListing>) | undefined,
  timeoutMs = 30_000,
  refused: ReadonlyMap<string, string> = new Map(),
  authOf?: DoctorInput["authOf"],
): Promise<ServerCheck[]> {
  const where = (p: Provenance) => `${p.file} (${p.key})`;
  const needsLogin = (base: { name: string; source: string }, message: string): ServerCheck => ({
    ...base,
    status: "warn",
    auth: "needs-login",
    problem: { message, fix: `Run \`${loginCommand(base.name)}\`` },
  });
  const checks = await Promise.all(discovery.servers.map(async (spec): Promise<ServerCheck> => {
    const base = { name: spec.name, source: where(spec.source) };
    const reason = refused.get(spec.name);
    if (reason) return { ...base, status: "info", problem: { message: reason } };
    if (!listTools) {
      const login = await authOf?.(spec.name, false).catch(() => undefined);
      if (login?.auth === "needs-login") return needsLogin(base, login.problem ?? "Needs a login");
      return {
        ...base,
        status: "info",
        ...(login ? { auth: login.auth } : {}),
        problem: { message: "Not started (--quick)" },
      };
    }
    const started = performance.now();
    try {
      const listing = await withTimeout(
        listTools(spec.name),
        timeoutMs,
        `did not list its tools within ${timeoutMs / 1000}s`,
      );
      const { tools, problems = [] } = Array.isArray(listing) ? { tools: listing } : listing;
      const login = await authOf?.(spec.name, true).catch(() => undefined);
      const leftOut = problems.filter((p) => p.leftOut);
      return {
        ...base,
        status: leftOut.length ? "warn" : "ok",
        ms: Math.round(performance.now() - started),
        tools: tools.length,
        ...(problems.length ? { toolProblems: problems } : {}),
        ...(login ? { auth: login.auth } : {}),
        ...(leftOut.length
          ? {
            problem: {
              message: `${leftOut.length} of its tools were left out: ` +
                leftOut.slice(0, 5).map((p) => `${p.tool}: ${p.problem}`).join("; ") +
                (leftOut.length > 5 ? "; ..." : ""),
              fix: "Its other tools work; codemode servers and codemode tools list the problems",
            },
          }
          : {}),
      };
    } catch (error) {
      if (error instanceof Error && error.name === "UpstreamAuthError") {
        return needsLogin(base, error.message);
      }
      const what = spec.transport === "stdio"
        ? `"${[spec.command, ...spec.args ?? []].join(" ")}"`
        : `"${spec.url}"`;
      return {
        ...base,
        status: "fail",
        ms: Math.round(performance.now() - started),
        problem: {
          message: String((error as Error).message ?? error),
          fix: `Check ${what} in ${where(spec.source)}, or remove the entry`,
        },
      };
    }
  }));
  for (const skipped of discovery.skipped) {
    checks.push({
      name: skipped.name,
      source: where(skipped.source),
      status: "info",
      problem: { message: `Skipped: ${skipped.reason}` },
    });
  }
  return checks;
}

/** Runs every check. Never throws; a broken piece becomes a "fail" finding. */
export async function runDoctor(input: DoctorInput): Promise<DoctorReport> {
  const file = input.configFile instanceof Error ? undefined : input.configFile;
  const configFile = checkConfigFile(input.configFile, input.configSearched ?? []);
  const { settings, checks: settingChecks, problems: keyProblems } = checkSettings(input.env, file);
  const envOf = (key: SettingKey) => settingChecks.find((c) => c.key === key)?.env ?? key;
  const policy = checkPolicy(settings, envOf, input.discovery.servers);
  const refused = new Map(policy.refusedServers.map((r) => [r.name, r.reason]));
  const runtimeOptions: RuntimeCheckOptions = {
    image: settings.image,
    limits: {
      memory: settings.memory,
      pids: settings.pids,
      ...(settings.cpus ? { cpus: settings.cpus } : {}),
    },
    maxOutput: settings.maxOutput,
    version: input.version,
    ...input.sandbox,
  };
  const isolation = settings.isolation;
  const [runtimes, stateDir, servers, tracing] = await Promise.all([
    Promise.all(
      input.runtimes.map((r) =>
        servesIsolation(r, isolation) ? checkRuntime(r, runtimeOptions) : notUsed(r, isolation)
      ),
    ),
    checkStateDir(settings.stateDir, input.version),
    checkServers(input.discovery, input.listTools, input.serverTimeoutMs, refused, input.authOf),
    checkTracing(settings, input.env, input.probeCollector),
  ]);
  const { runtime, reason, finding } = chooseRuntime(
    settings.runtime,
    runtimes,
    settings.sources?.runtime ?? envOf("runtime"),
    isolation,
  );
  const proof = runtimes.find((r) => r.name === runtime)?.isolation;
  const configs = checkConfigs(input.discovery);
  const mounts = checkMounts(settings.mounts ?? [], input.runtimes.find((r) => r.name === runtime));
  const findings: Finding[] = [
    ...(finding ? [finding] : []),
    ...runtimes.flatMap((r) =>
      r.status === "info"
        ? []
        : r.problems.map((p) => ({ status: r.status, subject: `runtime ${r.name}`, ...p }))
    ),
    ...(stateDir.status !== "ok" && stateDir.problem
      ? [{ status: stateDir.status, subject: "state directory", ...stateDir.problem }]
      : []),
    ...((configFile.status === "fail" || configFile.status === "warn") && configFile.problem
      ? [{ status: configFile.status, subject: "config file", ...configFile.problem }]
      : []),
    ...keyProblems,
    ...mountFindings(mounts),
    ...configs.flatMap((c) =>
      c.diagnostics.map((d) => ({
        status: d.severity === "error" ? "fail" as const : "warn" as const,
        subject: d.server ? `config ${d.file} (${d.server})` : `config ${d.file}`,
        message: d.message,
      }))
    ),
    ...servers.filter((s) => (s.status === "fail" || s.auth === "needs-login") && s.problem).map((s) => ({
      status: s.status,
      subject: `server ${s.name}`,
      ...s.problem!,
    })),
    ...settingChecks.filter((s) => s.problem).map((s) => ({
      status: s.status,
      subject: `setting ${s.source === "default" ? s.env : s.source}`,
      ...s.problem!,
    })),
    ...skillFindings(input.skills),
    ...tracingFindings(tracing),
  ];
  return {
    version: input.version,
    ...(input.install ? { install: input.install } : {}),
    ok: !findings.some((f) => f.status === "fail"),
    ...(runtime ? { runtime } : {}),
    ...(reason ? { runtimeReason: reason } : {}),
    isolation: { setting: isolation, ...(proof ? { proof } : {}) },
    runtimes,
    stateDir,
    configFile,
    configs,
    servers,
    settings: settingChecks,
    policy,
    mounts,
    ...(input.skills ? { skills: input.skills } : {}),
    tracing,
    findings,
  };
}

/**
 * The runtime codemode would use, and why. A broken runtime is only fatal when it is the one the setting
 * names, or when none works with `auto`; otherwise it is a warning (its status is lowered in place).
 * `source` is where the setting came from (a variable or a config file).
 */
export function chooseRuntime(
  setting: string,
  runtimes: RuntimeCheck[],
  source = "CODEMODE_RUNTIME",
  isolation: IsolationSetting = "container",
): { runtime?: string; reason?: string; finding?: Finding } {
  const works = (r: RuntimeCheck) => r.status === "ok" || r.status === "warn";
  const usable = runtimes.filter(works);
  if (setting !== "auto") {
    const named = runtimes.find((r) => r.name === setting);
    // Only the named runtime is ever used: the others' failures are warnings either way.
    if (named) demote(runtimes, named);
    if (named && works(named)) {
      return { runtime: named.name, reason: `${source} names it ("${setting}"); no other runtime is tried` };
    }
    return {
      finding: {
        status: "fail",
        subject: "runtime",
        message: named
          ? `CODEMODE_RUNTIME="${setting}" does not work here`
          : `CODEMODE_RUNTIME="${setting}" is not a registered runtime`,
        fix: usable.length
          ? `Fix it (see below) or set CODEMODE_RUNTIME=${usable[0].name}, which works`
          : "Fix one of the runtimes below",
      },
    };
  }
  if (usable.length === 0) {
    return {
      finding: {
        status: "fail",
        subject: "runtime",
        message: isolation === "gvisor"
          ? "No sandbox runtime works here under gVisor (CODEMODE_ISOLATION=gvisor); codemode will not fall " +
            "back to runc"
          : "No sandbox runtime works here",
        fix: runtimes.some((r) => r.installed)
          ? "Fix one of the runtimes below"
          : "Install podman (apt-get install podman runc) and build the image: codemode image build",
      },
    };
  }
  const chosen = usable[0];
  const skipped = runtimes.slice(0, runtimes.indexOf(chosen));
  const order = `auto takes the first that works of ${runtimes.map((r) => r.name).join(", ")}`;
  const why = (r: RuntimeCheck) =>
    !r.installed
      ? `${r.name} is not installed`
      : `${r.name} does not work (${r.problems[0]?.message ?? "see below"})`;
  demote(runtimes, chosen);
  return {
    runtime: chosen.name,
    reason: skipped.length ? `${order}: ${skipped.map(why).join("; ")}` : `${order}, and it is the first`,
  };
}

/** A runtime the isolation setting rules out: reported, never started. */
function notUsed(plugin: RuntimePlugin, isolation: IsolationSetting): RuntimeCheck {
  return {
    name: plugin.name,
    status: "info",
    installed: false,
    notUsed: true,
    problems: [{
      message: isolation === "gvisor"
        ? `Not used: CODEMODE_ISOLATION=gvisor runs every sandbox under gVisor, which ${plugin.name} cannot`
        : `Not used: its sandboxes run under gVisor, and CODEMODE_ISOLATION=${isolation}`,
    }],
  };
}

function demote(runtimes: RuntimeCheck[], chosen: RuntimeCheck): void {
  for (const r of runtimes) if (r !== chosen && r.status === "fail") r.status = "warn";
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...groups.get(key(item)) ?? [], item]);
  return groups;
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((
    _,
    reject,
  ) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
