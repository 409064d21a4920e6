/**
 * Settings from the environment and codemode's config file, validated once at start-up. A variable beats
 * the file, key by key; `CODEMODE_*` names win over the Python bridge's `MCP_BRIDGE_*` aliases.
 * @module
 */
import * as z from "zod";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { type ConfigFile, ConfigFileError, readConfigFile, userConfigDir } from "./file.ts";
import { globList } from "./globs.ts";
import { mountList, type MountSpec, resolveMounts } from "./mounts.ts";
import { type KeptServer, readKeptServers } from "./kept_servers.ts";

/** Accepts "30", "30s", "1.5s", "500ms", "2m" and returns seconds. */
function seconds(what: string) {
  return z.string().trim().transform((raw, ctx) => {
    const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/i.exec(raw);
    if (!m) {
      ctx.addIssue({
        code: "custom",
        message: `expected a duration such as 30, 30s, 500ms or 2m for ${what}`,
      });
      return z.NEVER;
    }
    const factor = { ms: 0.001, s: 1, m: 60, h: 3600 }[(m[2] ?? "s").toLowerCase() as "ms" | "s" | "m" | "h"];
    const value = Number(m[1]) * factor;
    if (value <= 0) {
      ctx.addIssue({ code: "custom", message: `expected a duration above zero for ${what}` });
      return z.NEVER;
    }
    return value;
  });
}

const memory = z.string().trim().regex(/^\d+[kmg]?$/i, "expected a size such as 512m or 2g").transform((s) =>
  s.toLowerCase()
);
const positiveInt = z.string().trim().regex(/^\d+$/, "expected a whole number").transform(Number).refine(
  (n) => n > 0,
  "expected a number above zero",
);
const bytes = z.string().trim().transform((raw, ctx) => {
  const m = /^(\d+)\s*([kmg]i?b?)?$/i.exec(raw);
  if (!m) {
    ctx.addIssue({ code: "custom", message: "expected a size in bytes such as 1048576, 512k or 1m" });
    return z.NEVER;
  }
  const unit = (m[2] ?? "").toLowerCase()[0] as "k" | "m" | "g" | undefined;
  return Number(m[1]) * (unit ? { k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[unit] : 1);
});
/** A registry's base URL (http or https), or "off". */
const registryUrl = z.string().trim().transform((raw, ctx) => {
  if (raw.toLowerCase() === "off") return "off";
  try {
    const url = new URL(raw);
    if (url.protocol === "https:" || url.protocol === "http:") return url.href.replace(/\/+$/, "");
  } catch {
    // reported below
  }
  ctx.addIssue({ code: "custom", message: "expected the registry's http(s) base URL, or off" });
  return z.NEVER;
});

/** What a fleet node's id must look like: a DNS label (a Kubernetes pod name, a host's short name). */
export const NODE_ID_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Comma-separated host names or IP addresses (as a Host header names them), lower-cased. */
const hostList = z.string().transform((raw, ctx) => {
  const names = raw.split(",").map((n) => n.trim().toLowerCase()).filter(Boolean);
  const bad = names.find((n) =>
    !/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)$/.test(n)
  );
  if (bad !== undefined || !names.length) {
    ctx.addIssue({
      code: "custom",
      message: bad === undefined
        ? "expected host names such as codemode.example.com"
        : `"${bad}" is not a host name: expected names such as codemode.example.com, without port or scheme`,
    });
    return z.NEVER;
  }
  return names;
});
/** Parses a comma-separated list of host names (`--allowed-hosts`), as CODEMODE_ALLOWED_HOSTS is. */
export function parseHostNames(raw: string): { names: string[] } | { error: string } {
  const parsed = hostList.safeParse(raw);
  return parsed.success ? { names: parsed.data } : { error: parsed.error.issues[0].message };
}

const bool = z.string().trim().toLowerCase().pipe(
  z.enum(["1", "0", "true", "false", "yes", "no", "on", "off"]),
)
  .transform((s) => ["1", "true", "yes", "on"].includes(s));

/** Each setting: its env name, bridge aliases, parser and default (as the string a user would type). */
const SPEC = {
  runtime: {
    env: "CODEMODE_RUNTIME",
    aliases: ["MCP_BRIDGE_RUNTIME"],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["auto", "podman", "docker", "nerdctl", "pyodide"])),
    fallback: "auto",
    doc: "Sandbox runtime: auto picks podman, then docker, then nerdctl, then the embedded pyodide runtime",
  },
  image: {
    env: "CODEMODE_IMAGE",
    aliases: ["MCP_BRIDGE_IMAGE"],
    parse: z.string().trim().min(1),
    fallback: "codemode-sandbox:latest",
    doc: "Container image; any image with python3 works (`codemode image build` makes the default)",
  },
  output: {
    env: "CODEMODE_OUTPUT",
    aliases: ["MCP_BRIDGE_OUTPUT_MODE", "MCP_BRIDGE_OUTPUT"],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["compact", "toon", "json"])),
    fallback: "compact",
    doc: "How results are rendered for the model: compact text, TOON or JSON",
  },
  timeout: {
    env: "CODEMODE_TIMEOUT",
    aliases: ["MCP_BRIDGE_TIMEOUT"],
    parse: seconds("the default timeout"),
    fallback: "30s",
    doc: "Default run_python timeout",
  },
  maxTimeout: {
    env: "CODEMODE_MAX_TIMEOUT",
    aliases: ["MCP_BRIDGE_MAX_TIMEOUT"],
    parse: seconds("the maximum timeout"),
    fallback: "120s",
    doc: "Largest timeout a caller may ask for",
  },
  memory: {
    env: "CODEMODE_MEMORY",
    aliases: ["MCP_BRIDGE_MEMORY"],
    parse: memory,
    fallback: "512m",
    doc: "Sandbox memory cap (swap capped at the same value)",
  },
  pids: {
    env: "CODEMODE_PIDS",
    aliases: ["MCP_BRIDGE_PIDS"],
    parse: positiveInt,
    fallback: "128",
    doc: "Sandbox process/thread cap",
  },
  cpus: {
    env: "CODEMODE_CPUS",
    aliases: ["MCP_BRIDGE_CPUS"],
    parse: z.string().trim().regex(/^\d+(\.\d+)?$/, "expected a number of CPUs such as 1 or 1.5").optional(),
    fallback: undefined,
    doc: "Sandbox CPU quota (unset: no quota)",
  },
  seccomp: {
    env: "CODEMODE_SECCOMP",
    aliases: [],
    parse: z.string().trim().min(1),
    fallback: "codemode",
    doc: "Seccomp profile of container sandboxes: codemode (built in, see docs/security.md), engine (the " +
      "engine's default) or the path of a JSON profile",
  },
  // The gVisor tier (docs/security.md#gvisor).
  isolation: {
    env: "CODEMODE_ISOLATION",
    aliases: [],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["container", "gvisor"])),
    fallback: "container",
    doc:
      "container: sandboxes share the host kernel (runc), behind codemode's seccomp profile; gvisor: every " +
      "sandbox runs under gVisor's user-space kernel (runsc), never falling back to runc or Pyodide",
  },
  gvisorPlatform: {
    env: "CODEMODE_GVISOR_PLATFORM",
    aliases: [],
    parse: z.string().trim().toLowerCase().regex(
      /^[a-z][a-z0-9_-]*$/,
      "expected a runsc platform such as ptrace",
    ),
    fallback: "ptrace",
    doc:
      "How runsc intercepts system calls under CODEMODE_ISOLATION=gvisor: ptrace works everywhere; systrap " +
      "(newer runsc) or kvm (needs /dev/kvm) are faster where they work",
  },
  runsc: {
    env: "CODEMODE_RUNSC",
    aliases: [],
    parse: z.string().trim().min(1).optional(),
    fallback: undefined,
    doc: "The runsc binary for CODEMODE_ISOLATION=gvisor (default: runsc on PATH); passed to the engine by " +
      "its absolute path",
  },
  idleTimeout: {
    env: "CODEMODE_IDLE_TIMEOUT",
    aliases: ["MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "MCP_BRIDGE_IDLE_TIMEOUT"],
    parse: seconds("the idle timeout"),
    fallback: "300s",
    doc: "A sandbox idle this long is stopped; the next call starts a fresh one",
  },
  maxOutput: {
    env: "CODEMODE_MAX_OUTPUT",
    aliases: [],
    parse: bytes,
    fallback: "1m",
    doc: "Cap on stdout and on stderr per run; the rest is dropped and the truncation stated",
  },
  stateDir: {
    env: "CODEMODE_STATE_DIR",
    aliases: ["MCP_BRIDGE_STATE_DIR"],
    parse: z.string().trim().min(1),
    fallback: undefined,
    doc:
      "Where caches and unpacked assets live (default $XDG_STATE_HOME/codemode or ~/.local/state/codemode)",
  },
  logLevel: {
    env: "CODEMODE_LOG_LEVEL",
    aliases: ["MCP_BRIDGE_LOG_LEVEL"],
    parse: z.string().trim().toLowerCase().transform((s) => s === "warning" ? "warn" : s).pipe(
      z.enum(["debug", "info", "warn", "error"]),
    ),
    fallback: "warn",
    doc: "Log level for the JSON logs on stderr",
  },
  logFile: {
    env: "CODEMODE_LOG_FILE",
    aliases: [],
    parse: z.string().trim().min(1).optional(),
    fallback: undefined,
    doc: "Append the JSON logs to this file instead of writing them to stderr",
  },
  allowSelf: {
    env: "CODEMODE_ALLOW_SELF_SERVER",
    aliases: ["MCP_BRIDGE_ALLOW_SELF_SERVER"],
    parse: bool,
    fallback: "0",
    doc: "Keep config entries that would launch codemode itself",
  },
  config: {
    env: "CODEMODE_CONFIG",
    aliases: [],
    parse: z.string().trim().min(1).optional(),
    fallback: undefined,
    doc: "The config file to read instead of ./codemode.yaml or ~/.config/codemode/config.yaml",
  },
  allowServers: {
    env: "CODEMODE_ALLOW_SERVERS",
    aliases: [],
    parse: globList("server"),
    fallback: "*",
    doc: "Servers sandbox code may use: comma-separated globs (see docs/policy.md)",
  },
  denyServers: {
    env: "CODEMODE_DENY_SERVERS",
    aliases: [],
    parse: globList("server").optional(),
    fallback: undefined,
    doc: "Servers hidden from sandbox code; beats the allow list (unset: none)",
  },
  allowTools: {
    env: "CODEMODE_ALLOW_TOOLS",
    aliases: [],
    parse: globList("tool"),
    fallback: "*",
    doc: "Tools sandbox code may call: globs of server/tool, or tool for any server",
  },
  denyTools: {
    env: "CODEMODE_DENY_TOOLS",
    aliases: [],
    parse: globList("tool").optional(),
    fallback: undefined,
    doc: "Tools hidden from sandbox code; beats the allow list (unset: none)",
  },
  readOnly: {
    env: "CODEMODE_READ_ONLY",
    aliases: [],
    parse: bool,
    fallback: "0",
    doc: "Allow only tools their server annotates readOnlyHint",
  },
  maxToolCalls: {
    env: "CODEMODE_MAX_TOOL_CALLS",
    aliases: [],
    parse: positiveInt.optional(),
    fallback: undefined,
    doc: "Tool calls one run may make; later calls raise PermissionError (unset: no limit)",
  },
  maxRuns: {
    env: "CODEMODE_MAX_RUNS",
    aliases: [],
    parse: positiveInt.optional(),
    fallback: undefined,
    doc: "Runs executing at once across sessions; others wait, within their timeout (unset: no cap)",
  },
  maxSessions: {
    env: "CODEMODE_MAX_SESSIONS",
    aliases: [],
    parse: positiveInt,
    fallback: "32",
    doc: "Live sandbox sessions; a new one stops the least recently used idle one, or is refused",
  },
  // Long work (docs/jobs.md).
  maxJobs: {
    env: "CODEMODE_MAX_JOBS",
    aliases: [],
    parse: positiveInt,
    fallback: "16",
    doc: "Background jobs one session may have running (runtime.start_job, and asyncio tasks a run leaves " +
      "running)",
  },
  maxJobTime: {
    env: "CODEMODE_MAX_JOB_TIME",
    aliases: [],
    parse: seconds("the longest a background job may run"),
    fallback: "1h",
    doc: "Longest a background job may run before it is cancelled; a session with running jobs is not " +
      "stopped as idle within it",
  },
  maxTaskTime: {
    env: "CODEMODE_MAX_TASK_TIME",
    aliases: [],
    parse: seconds("the longest a run_python task may run"),
    fallback: "1h",
    doc: "Longest timeout of a run_python called as an MCP task (instead of CODEMODE_MAX_TIMEOUT); its " +
      "default timeout too",
  },
  // Rich display (issue 13, part A).
  maxDisplay: {
    env: "CODEMODE_MAX_DISPLAY",
    aliases: [],
    parse: bytes,
    fallback: "8m",
    doc: "Cap on the bytes of one run's displays (plots, images, tables); displays beyond it are dropped " +
      "and the result says which",
  },
  // Files in and out (docs/files.md).
  mounts: {
    env: "CODEMODE_MOUNTS",
    aliases: [],
    parse: mountList().optional(),
    fallback: undefined,
    doc: "Host folders the sandbox sees: comma-separated HOST:SANDBOX (read-only) or HOST:SANDBOX:rw (see " +
      "docs/files.md)",
  },
  maxArtifact: {
    env: "CODEMODE_MAX_ARTIFACT",
    aliases: [],
    parse: bytes,
    fallback: "50m",
    doc: "Cap on one artifact file; a bigger one is left out and the result's note names it",
  },
  maxSessionArtifacts: {
    env: "CODEMODE_MAX_SESSION_ARTIFACTS",
    aliases: [],
    parse: bytes,
    fallback: "256m",
    doc: "Cap on all artifacts one session keeps on the host; files past it are left out and named",
  },
  maxMountCopy: {
    env: "CODEMODE_MAX_MOUNT_COPY",
    aliases: [],
    parse: bytes,
    fallback: "64m",
    doc: "Under Pyodide, mounts are copied into its memory file system up to this many bytes in all",
  },
  skills: {
    env: "CODEMODE_SKILLS",
    aliases: [],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["rw", "ro", "off"])),
    fallback: "rw",
    doc: "Skills: rw saves and loads them, ro only loads them, off turns them off (see docs/skills.md)",
  },
  confirm: {
    env: "CODEMODE_CONFIRM_TOOLS",
    aliases: [],
    parse: globList("tool").optional(),
    fallback: undefined,
    doc:
      "Tools whose calls the user must approve first (asked through MCP elicitation): globs of server/tool " +
      "(unset: none; see docs/approvals.md)",
  },
  confirmDestructive: {
    env: "CODEMODE_CONFIRM_DESTRUCTIVE",
    aliases: [],
    parse: bool,
    fallback: "0",
    doc:
      "Ask the user before every call of a tool not annotated readOnlyHint: true or destructiveHint: false",
  },
  confirmTimeout: {
    env: "CODEMODE_CONFIRM_TIMEOUT",
    aliases: [],
    parse: seconds("the approval timeout"),
    fallback: "300s",
    doc: "How long a question waits for the user's answer before the call counts as declined",
  },
  confirmFallback: {
    env: "CODEMODE_CONFIRM_FALLBACK",
    aliases: [],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["deny", "allow"])),
    fallback: "deny",
    doc:
      "When the client cannot be asked (no elicitation capability): deny the call, or allow it with a note",
  },
  // Checks and plans (docs/check.md, docs/approvals.md).
  precheck: {
    env: "CODEMODE_PRECHECK",
    aliases: [],
    parse: z.string().trim().toLowerCase().transform((s) =>
      ["1", "true", "yes"].includes(s) ? "on" : ["0", "false", "no"].includes(s) ? "off" : s
    ).pipe(z.enum(["on", "off"])),
    fallback: "on",
    doc: "Check each program's tool calls against the servers' tools and schemas before it runs; when a " +
      "finding is certain, nothing runs (see docs/check.md)",
  },
  planUnplanned: {
    env: "CODEMODE_PLAN_UNPLANNED",
    aliases: [],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["deny", "ask"])),
    fallback: "deny",
    doc: "In a `runtime.plan` block the user approved, a call that was not in the plan: deny it " +
      "(PermissionError) or ask about it separately",
  },
  // Servers added from a registry (docs/discovery.md#adding-servers-from-a-registry).
  registryUrl: {
    env: "CODEMODE_REGISTRY_URL",
    aliases: [],
    parse: registryUrl,
    fallback: "https://registry.modelcontextprotocol.io",
    doc: "The MCP registry runtime.find_servers() searches (its base URL; an organisation's own works the " +
      "same); off turns find and add off",
  },
  addServers: {
    env: "CODEMODE_ADD_SERVERS",
    aliases: [],
    parse: z.string().trim().toLowerCase().pipe(z.enum(["off", "ask", "allow"])),
    fallback: "off",
    doc: "Whether sandbox code may add registry servers with runtime.add_server(): off, ask (the user " +
      "approves each, through MCP elicitation) or allow (no question)",
  },
  addAllow: {
    env: "CODEMODE_ADD_ALLOW",
    aliases: [],
    parse: globList("add"),
    fallback: "*",
    doc: "Registry servers that may be added: globs of registry names (io.github.org/*) or packages " +
      "(npm:<name>, pypi:<name>, remote:<host>)",
  },
  addDeny: {
    env: "CODEMODE_ADD_DENY",
    aliases: [],
    parse: globList("add").optional(),
    fallback: undefined,
    doc: "Registry servers that may never be added; beats the allow list (unset: none)",
  },
  prewarm: {
    env: "CODEMODE_PREWARM",
    aliases: [],
    parse: z.string().trim().toLowerCase().transform((s) =>
      ["1", "true", "yes"].includes(s) ? "on" : ["0", "false", "no"].includes(s) ? "off" : s
    ).pipe(z.enum(["stdio", "on", "off"])),
    fallback: "stdio",
    doc: "Start a client's sandbox as it connects, before its first run: stdio (stdio clients), on (HTTP " +
      "sessions too, within CODEMODE_MAX_SESSIONS) or off; an unused one idles until CODEMODE_IDLE_TIMEOUT",
  },
  // Dashboard activity (issue 16).
  activity: {
    env: "CODEMODE_ACTIVITY",
    aliases: [],
    parse: bool,
    fallback: "1",
    doc:
      "Publish each serve's runs and tool calls under the state dir (0600) for `codemode ui`; 0 turns it off",
  },
  activityMax: {
    env: "CODEMODE_ACTIVITY_MAX",
    aliases: [],
    parse: bytes,
    fallback: "4m",
    doc: "Size at which a serve's activity log is rotated; it keeps the current and the previous file",
  },
  // A fleet of serve --http nodes behind a balancer (docs/scale.md).
  nodeId: {
    env: "CODEMODE_NODE_ID",
    aliases: [],
    parse: z.string().trim().regex(
      NODE_ID_PATTERN,
      "expected lowercase letters, digits and inner hyphens, 1 to 63 characters (a DNS label such as node-1)",
    ).optional(),
    fallback: undefined,
    doc: "This node's id in a fleet (default: the host name, lower-cased): the prefix of every session id " +
      "serve --http mints, by which a balancer routes (see docs/scale.md)",
  },
  allowedHosts: {
    env: "CODEMODE_ALLOWED_HOSTS",
    aliases: [],
    parse: hostList.optional(),
    fallback: undefined,
    doc: "Host names serve --http answers to besides loopback and its --host, comma-separated: the names " +
      "clients reach it by through a balancer",
  },
  drainTimeout: {
    env: "CODEMODE_DRAIN_TIMEOUT",
    aliases: [],
    parse: seconds("the drain timeout"),
    fallback: "30s",
    doc: "On SIGTERM serve --http takes no new session and ends each live one once its work in flight is " +
      "done, waiting this long at most, then exits",
  },
  skillsDir: {
    env: "CODEMODE_SKILLS_DIR",
    aliases: [],
    parse: z.string().trim().min(1).optional(),
    fallback: undefined,
    doc:
      "Where saved skills are written and read (default ~/.config/codemode/skills); nodes of a fleet may " +
      "share one (saves are atomic)",
  },
  oauthDir: {
    env: "CODEMODE_OAUTH_DIR",
    aliases: [],
    parse: z.string().trim().min(1).optional(),
    fallback: undefined,
    doc: "Where OAuth tokens are kept (default <state dir>/oauth); nodes of a fleet may share one " +
      "(refreshes take a lock)",
  },
} as const;

type Spec = typeof SPEC;
/** A setting's name in code and in config files. */
export type SettingKey = keyof Spec;
/** Validated settings. `sources` says where each value that is not the default came from. */
export type Settings = { [K in keyof Spec]: z.output<Spec[K]["parse"]> } & {
  stateDir: string;
  /** Extra skill directories from the config file's `skills: {dirs: [...]}`, absolute, in order. */
  skillDirs: string[];
  /** Servers kept in the config file's `servers:` (added from a registry); see kept_servers.ts. */
  keptServers: KeptServer[];
  /** What is wrong with entries under `servers:` (reported by discovery; the other entries load). */
  keptServerProblems: string[];
  /** The config file that was read, if any (kept servers are written to it). */
  configFile?: string;
  sources?: SettingSources;
};
/** Per setting: the variable that set it, or the path of the config file that did. */
export type SettingSources = Partial<Record<SettingKey, string>>;

/** A value that failed validation; its default is used instead. */
export interface SettingProblem {
  /** The setting's key, or the unknown key a config file used. */
  key: string;
  /** The variable or config file that gave the value. */
  source: string;
  message: string;
}

/** A setting's documentation row, for README and `doctor`. */
export interface SettingDoc {
  key: string;
  env: string;
  aliases: readonly string[];
  fallback: string | undefined;
  doc: string;
}

/** The settings table, in declaration order. */
export function settingDocs(): SettingDoc[] {
  return Object.entries(SPEC).map(([key, s]) => ({
    key,
    env: s.env,
    aliases: s.aliases,
    fallback: s.fallback,
    doc: s.doc,
  }));
}

/** Thrown for a bad setting; the message names the variable and what it accepts. */
export class SettingsError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = "SettingsError";
  }
}

/**
 * Validated settings from `env` over a config file over the defaults; throws SettingsError for the
 * first bad value. Called without arguments: process.env over the config file found from the working
 * directory (see config_file.ts); with an `env`, only the `file` given is used.
 */
export function loadSettings(env?: Record<string, string | undefined>, file?: ConfigFile): Settings {
  if (!env) {
    env = process.env;
    try {
      file ??= readConfigFile(env);
    } catch (error) {
      if (error instanceof ConfigFileError) throw new SettingsError(error.message);
      throw error;
    }
  }
  const { settings, problems } = resolveSettings(env, file);
  if (problems.length) throw new SettingsError(problems[0].message);
  return settings;
}

/** Like {@link loadSettings}, but a bad value is reported and its default used instead; never throws. */
export function resolveSettings(
  env: Record<string, string | undefined>,
  file?: ConfigFile,
): { settings: Settings; problems: SettingProblem[] } {
  const problems: SettingProblem[] = [];
  const sections: FileSections = {};
  const fromFile = fileValues(file, problems, sections, env);
  const out: Record<string, unknown> = {};
  const sources: SettingSources = {};
  const fallbackOf = (s: Spec[SettingKey]) =>
    s.fallback === undefined ? undefined : (s.parse as z.ZodType).parse(s.fallback);
  for (const [key, s] of Object.entries(SPEC) as [SettingKey, Spec[SettingKey]][]) {
    const name = [s.env, ...s.aliases].find((n) => env[n] !== undefined && env[n] !== "");
    const given = name ? { raw: env[name]!, source: name } : fromFile.get(key);
    if (!given) {
      out[key] = fallbackOf(s);
      continue;
    }
    const parsed = (s.parse as z.ZodType).safeParse(given.raw);
    if (parsed.success) {
      out[key] = parsed.data;
      sources[key] = given.source;
      continue;
    }
    const reason = parsed.error.issues.map((i) => describeIssue(i)).join("; ");
    const message = name
      ? `Invalid ${name}="${given.raw}": ${reason}`
      : `Invalid ${fromFile.get(key)!.as}="${given.raw}" in "${given.source}": ${reason}`;
    problems.push({ key, source: given.source, message });
    out[key] = fallbackOf(s);
  }
  if ((out.timeout as number) > (out.maxTimeout as number)) {
    // Valid one by one, contradictory together: both fall back, so the result stays consistent.
    const where = (key: SettingKey) => sources[key] ?? SPEC[key].env;
    problems.push({
      key: "timeout",
      source: where("timeout"),
      message: `Invalid ${where("timeout")}: the default timeout (${out.timeout}s) exceeds ${
        where("maxTimeout")
      } (${out.maxTimeout}s)`,
    });
    out.timeout = fallbackOf(SPEC.timeout);
    out.maxTimeout = fallbackOf(SPEC.maxTimeout);
    delete sources.timeout;
    delete sources.maxTimeout;
  }
  if (out.isolation === "gvisor" && out.runtime === "pyodide") {
    // Pyodide is not a container: gVisor cannot run it. The runtime falls back, never the isolation.
    const where = (key: SettingKey) => sources[key] ?? SPEC[key].env;
    problems.push({
      key: "runtime",
      source: where("runtime"),
      message: `Invalid ${where("runtime")}: the pyodide runtime cannot run under gVisor (${
        where("isolation")
      }=gvisor); choose podman or docker, or auto`,
    });
    out.runtime = fallbackOf(SPEC.runtime);
    delete sources.runtime;
  }
  out.stateDir ??= env.XDG_STATE_HOME
    ? join(env.XDG_STATE_HOME, "codemode")
    : join(env.HOME || homedir(), ".local", "state", "codemode");
  if (out.mounts) {
    // Checked on the host's file system once the state directory is known.
    const source = sources.mounts!;
    const inFile = source === file?.path ? fromFile.get("mounts") : undefined;
    const resolved = resolveMounts(out.mounts as MountSpec[], {
      home: env.HOME || homedir(),
      stateDir: out.stateDir as string,
      configDir: userConfigDir(env),
      base: inFile ? dirname(source) : process.cwd(),
    });
    if (typeof resolved === "string") {
      problems.push({
        key: "mounts",
        source,
        message: inFile
          ? `Invalid ${inFile.as}="${inFile.raw}" in "${source}": ${resolved}`
          : `Invalid ${source}="${env[source]}": ${resolved}`,
      });
      out.mounts = undefined;
      delete sources.mounts;
    } else {
      out.mounts = resolved;
    }
  }
  out.skillDirs = sections.skillDirs ?? [];
  out.keptServers = sections.servers ?? [];
  out.keptServerProblems = sections.serverProblems ?? [];
  if (file) out.configFile = file.path;
  out.sources = sources;
  return { settings: out as Settings, problems };
}

/** What the config file's structured keys hold beyond plain settings. */
interface FileSections {
  skillDirs?: string[];
  servers?: KeptServer[];
  serverProblems?: string[];
}

/** `skills:` as a mapping: `mode` is CODEMODE_SKILLS, `dirs` the extra skill directories. */
const SkillsSection = z.strictObject({
  mode: z.enum(["rw", "ro", "off"]).optional(),
  dirs: z.array(z.string().trim().min(1)).optional(),
});

/**
 * Reads a structured key's mapping into `sections`; returns the raw value of the setting itself, if given.
 * Paths are resolved: `~/` against HOME, relative ones against the config file's directory.
 */
function fileSection(
  key: SettingKey,
  value: object,
  file: ConfigFile,
  sections: FileSections,
  env: Record<string, string | undefined>,
): { raw?: string; problem?: string } {
  if (key !== "skills") return { problem: "expected a value or a list of values, not a mapping" };
  const parsed = SkillsSection.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length ? ` at ${issue.path.join(".")}` : "";
    return { problem: `expected {mode: rw|ro|off, dirs: [paths]}${where}: ${describeIssue(issue)}` };
  }
  const home = env.HOME || homedir();
  sections.skillDirs = (parsed.data.dirs ?? []).map((dir) =>
    dir === "~" || dir.startsWith("~/")
      ? join(home, dir.slice(1))
      : isAbsolute(dir)
      ? dir
      : resolve(dirname(file.path), dir)
  );
  return { raw: parsed.data.mode };
}

/**
 * A config file's values as the strings a variable would hold, by setting key. Keys match in any case,
 * with or without `_` and `-` (`maxToolCalls`, `max_tool_calls`); lists are joined with commas. A
 * structured key (`skills: {mode, dirs}`) fills `sections` as well.
 */
function fileValues(
  file: ConfigFile | undefined,
  problems: SettingProblem[],
  sections: FileSections,
  env: Record<string, string | undefined>,
): Map<SettingKey, { raw: string; source: string; as: string }> {
  const values = new Map<SettingKey, { raw: string; source: string; as: string }>();
  if (!file) return values;
  const fold = (k: string) => k.toLowerCase().replace(/[-_]/g, "");
  const keys = new Map((Object.keys(SPEC) as SettingKey[]).map((k) => [fold(k), k]));
  const problem = (key: string, message: string) => problems.push({ key, source: file.path, message });
  for (const [as, value] of Object.entries(file.values)) {
    if (fold(as) === "servers") {
      const kept = readKeptServers(value, file.path);
      sections.servers = kept.servers;
      sections.serverProblems = kept.problems;
      continue;
    }
    const key = keys.get(fold(as));
    if (!key || key === "config") {
      problem(
        as,
        key
          ? `Invalid "${as}" in "${file.path}": only the CODEMODE_CONFIG variable can name the config file`
          : `Unknown key "${as}" in "${file.path}": expected one of ${
            [...keys.values()].filter((k) => k !== "config").join(", ")
          }`,
      );
      continue;
    }
    if (value === null || value === undefined) continue;
    const scalar = (v: unknown) => typeof v === "string" || typeof v === "number" || typeof v === "boolean";
    if (typeof value === "object" && !Array.isArray(value)) {
      const section = fileSection(key, value, file, sections, env);
      if (section.problem) problem(key, `Invalid ${as} in "${file.path}": ${section.problem}`);
      else if (section.raw !== undefined) values.set(key, { raw: section.raw, source: file.path, as });
      continue;
    }
    if (!(scalar(value) || (Array.isArray(value) && value.every(scalar)))) {
      problem(key, `Invalid ${as} in "${file.path}": expected a value or a list of values, not a mapping`);
      continue;
    }
    values.set(key, { raw: Array.isArray(value) ? value.join(",") : String(value), source: file.path, as });
  }
  return values;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === "invalid_value" && "values" in issue) {
    return `expected one of ${(issue.values as unknown[]).join(", ")}`;
  }
  return issue.message;
}
