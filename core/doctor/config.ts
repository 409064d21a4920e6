/**
 * `codemode doctor` on codemode's own configuration: which config file was read (or why it could not
 * be), each effective setting and where it came from, and the policy with the configured servers it
 * refuses.
 * @module
 */
import type { Problem } from "../contracts/runtime.ts";
import type { ServerSpec } from "../contracts/discovery.ts";
import { type ConfigFile, ConfigFileError } from "../config/file.ts";
import type { CheckStatus, Finding } from "./finding.ts";
import { policyOf } from "../config/policy.ts";
import { resolveSettings, settingDocs, type SettingKey, type Settings } from "../config/settings.ts";

/** One effective setting and where its value came from. */
export interface SettingCheck {
  key: string;
  env: string;
  value: unknown;
  /** The variable or config file that set it, or "default". */
  source: string;
  doc: string;
  status: CheckStatus;
  problem?: Problem;
}

/** codemode's own config file. */
export interface ConfigFileCheck {
  /** The file read, or the one that failed; absent when there is none. */
  path?: string;
  /** Where codemode looked, best first (when there is no file). */
  searched: string[];
  /** Files that exist but lost to `path`. */
  ignored: string[];
  status: CheckStatus;
  problem?: Problem;
}

/** One policy rule or limit in effect. */
export interface PolicyRuleCheck {
  key: SettingKey;
  env: string;
  value: unknown;
  /** The variable or config file that set it, or "default". */
  source: string;
}

/** The effective policy. */
export interface PolicyCheck {
  /** True when no rule refuses a server or tool and no tool-call limit applies. */
  open: boolean;
  rules: PolicyRuleCheck[];
  /** Configured servers the policy refuses: sandbox code cannot see them, and they are never started. */
  refusedServers: { name: string; reason: string }[];
}

/** The settings that make up the policy, in the order doctor shows them. */
export const POLICY_KEYS: SettingKey[] = [
  "allowServers",
  "denyServers",
  "allowTools",
  "denyTools",
  "readOnly",
  "maxToolCalls",
  "maxOutput",
  "maxDisplay",
  "maxTimeout",
  "maxRuns",
  "maxSessions",
  "confirm",
  "confirmDestructive",
  "confirmTimeout",
  "confirmFallback",
  "planUnplanned",
  "precheck",
];

/**
 * Settings from `env` over the config `file`, and a check per setting; a bad value falls back to its
 * default. `problems` are those of config file keys that name no setting.
 */
export function checkSettings(
  env: Record<string, string | undefined>,
  file?: ConfigFile,
): { settings: Settings; checks: SettingCheck[]; problems: Finding[] } {
  const { settings, problems } = resolveSettings(env, file);
  const docs = settingDocs();
  const known = new Set(docs.map((d) => d.key));
  const checks = docs.map((doc): SettingCheck => {
    const problem = problems.find((p) => p.key === doc.key);
    const source = settings.sources?.[doc.key as SettingKey] ?? "default";
    return {
      key: doc.key,
      env: doc.env,
      value: doc.key === "mounts"
        ? settings.mounts?.map((m) => `${m.host}:${m.target}:${m.readOnly ? "ro" : "rw"}`)
        : (settings as Record<string, unknown>)[doc.key],
      source: problem?.source ?? source,
      doc: doc.doc,
      status: problem ? "fail" : "ok",
      ...(problem
        ? {
          problem: {
            message: problem.message,
            fix: `Fix or unset ${
              problem.source === file?.path ? `"${problem.key}" in ${problem.source}` : problem.source
            }; the default is used meanwhile`,
          },
        }
        : {}),
    };
  });
  const unknown = problems.filter((p) => !known.has(p.key)).map((p): Finding => ({
    status: "fail",
    subject: `config ${p.source}`,
    message: p.message,
    fix: "Remove or rename the key (docs/policy.md lists them)",
  }));
  return { settings, checks, problems: unknown };
}

/** The config file as found: a parsed file, the error reading it, or nothing. Never throws. */
export function checkConfigFile(
  found: ConfigFile | ConfigFileError | undefined,
  searched: string[],
): ConfigFileCheck {
  if (found instanceof ConfigFileError) {
    return {
      path: found.path,
      searched,
      ignored: [],
      status: "fail",
      problem: { message: found.message, fix: `Fix "${found.path}"; until then no config file is used` },
    };
  }
  if (!found) {
    return {
      searched,
      ignored: [],
      status: "info",
      problem: { message: "No config file; settings come from the environment and the defaults" },
    };
  }
  const ignored = found.ignored ?? [];
  return {
    path: found.path,
    searched,
    ignored,
    status: ignored.length ? "warn" : "ok",
    ...(ignored.length
      ? {
        problem: {
          message: `Only "${found.path}" is read; ${ignored.map((p) => `"${p}"`).join(", ")} ignored`,
          fix: "Merge them into one file, or delete the ones not meant to be used",
        },
      }
      : {}),
  };
}

/** The policy the settings describe, and the configured servers it refuses. */
export function checkPolicy(
  settings: Settings,
  envOf: (key: SettingKey) => string,
  servers: ServerSpec[],
): PolicyCheck {
  const policy = policyOf(settings);
  const refusedServers = servers.flatMap((spec) => {
    const verdict = policy.allowsServer(spec.name);
    return verdict.ok ? [] : [{ name: spec.name, reason: verdict.reason }];
  });
  return {
    open: policy.open,
    rules: POLICY_KEYS.map((key) => ({
      key,
      env: envOf(key),
      value: settings[key],
      source: settings.sources?.[key] ?? "default",
    })),
    refusedServers,
  };
}
