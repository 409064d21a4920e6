/**
 * Settings from the environment, validated once at start-up. `CODEMODE_*` names win over the Python
 * bridge's `MCP_BRIDGE_*` aliases.
 * @module
 */
import * as z from "zod";
import { homedir } from "node:os";
import { join } from "node:path";

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
  allowSelf: {
    env: "CODEMODE_ALLOW_SELF_SERVER",
    aliases: ["MCP_BRIDGE_ALLOW_SELF_SERVER"],
    parse: bool,
    fallback: "0",
    doc: "Keep config entries that would launch codemode itself",
  },
} as const;

type Spec = typeof SPEC;
/** Validated settings. */
export type Settings = { [K in keyof Spec]: z.output<Spec[K]["parse"]> } & { stateDir: string };

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

/** Reads and validates settings from an environment (process.env by default). */
export function loadSettings(env: Record<string, string | undefined> = process.env): Settings {
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(SPEC)) {
    const name = [s.env, ...s.aliases].find((n) => env[n] !== undefined && env[n] !== "");
    const raw = name ? env[name] : s.fallback;
    if (raw === undefined) {
      out[key] = undefined;
      continue;
    }
    const parsed = (s.parse as z.ZodType).safeParse(raw);
    if (!parsed.success) {
      const reason = parsed.error.issues.map((i) => describeIssue(i)).join("; ");
      throw new SettingsError(`Invalid ${name ?? s.env}="${raw}": ${reason}`);
    }
    out[key] = parsed.data;
  }
  const settings = out as Settings;
  if (settings.timeout > settings.maxTimeout) {
    throw new SettingsError(
      `Invalid CODEMODE_TIMEOUT: the default timeout (${settings.timeout}s) exceeds CODEMODE_MAX_TIMEOUT (${settings.maxTimeout}s)`,
    );
  }
  settings.stateDir ??= env.XDG_STATE_HOME
    ? join(env.XDG_STATE_HOME, "codemode")
    : join(env.HOME || homedir(), ".local", "state", "codemode");
  return settings;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === "invalid_value" && "values" in issue) {
    return `expected one of ${(issue.values as unknown[]).join(", ")}`;
  }
  return issue.message;
}
