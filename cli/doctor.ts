/**
 * `codemode doctor [--json] [--quick]`: checks runtimes (with a real sandbox), the image, the state
 * directory, config files, servers, settings and the policy, and prints one fix per problem. Exit code 1 when
 * something is broken; warnings don't fail.
 * @module
 */
import { createCodemode, defaultPlugins } from "../mod.ts";
import { bootstrapCommand, bootstrapFrame } from "../sandbox/source.ts";
import { checkSettings, checkSkills, type DoctorReport, runDoctor } from "../core/doctor/checks.ts";
import { configCandidates, type ConfigFile, ConfigFileError, readConfigFile } from "../core/config/file.ts";
import type { RuntimeCheck } from "../core/doctor/runtime.ts";
import { describeLibraries } from "../core/doctor/libraries.ts";
import { installKind, VERSION } from "../core/version.ts";
import { probeAuth } from "../core/auth/probe.ts";
import { recordDetection } from "../core/sandbox/runtime_select.ts";
import { readStateStamp, STATE_FORMAT } from "../core/config/state_stamp.ts";
import { type Colors, colors, formatMs, mark, printJson, table } from "./_render.ts";
import { escapeDeep } from "./_terminal_guard.ts";

/** Flags of `codemode doctor`. */
export interface DoctorOptions {
  json?: boolean;
  quick?: boolean;
}

/** Runs every check, prints the report, and returns the exit code (1 when something is broken). */
export async function doctor(options: DoctorOptions = {}): Promise<number> {
  const env = process.env;
  let configFile: ConfigFile | ConfigFileError | undefined;
  try {
    configFile = readConfigFile(env);
  } catch (error) {
    if (!(error instanceof ConfigFileError)) throw error;
    configFile = error;
  }
  const file = configFile instanceof ConfigFileError ? undefined : configFile;
  // Bad settings are findings, not a crash: the app runs on the valid ones (defaults for the rest).
  const { settings } = checkSettings(env, file);
  const plugins = defaultPlugins(settings);
  // A state directory a newer codemode wrote is reported (checkStateDir), and nothing is recorded in it.
  const newerState = await readStateStamp(settings.stateDir).then(
    (stamp) => (stamp?.format ?? 0) > STATE_FORMAT,
    () => false,
  );
  // Discovery problems are in the report; logging them too would print each one twice.
  const app = await createCodemode({
    claimStateDir: false,
    settings: env.CODEMODE_LOG_LEVEL || env.MCP_BRIDGE_LOG_LEVEL
      ? settings
      : { ...settings, logLevel: "error" },
    plugins,
  });
  let report: DoctorReport;
  try {
    report = await runDoctor({
      version: VERSION,
      install: installKind(),
      env,
      runtimes: plugins.runtimes(),
      discovery: app.discovery,
      listTools: options.quick ? undefined : (name) => app.pool.listing(name),
      authOf: async (name, started) => {
        const spec = app.servers.find((s) => s.name === name);
        const auth = spec && app.oauth.forServer(spec);
        if (!spec || !auth) return undefined;
        return started ? { auth: auth.state() } : await probeAuth(spec, auth);
      },
      sandbox: {
        command: bootstrapCommand(),
        bootstrap: () => bootstrapFrame(app.bootstrapConfig()),
        // Doctor detects afresh; what it found replaces the cached verdicts serve starts from.
        detected: newerState
          ? undefined
          : (plugin, detection) => recordDetection(plugin, detection, app.detections),
      },
      configFile,
      configSearched: configCandidates(env, process.cwd()),
      skills: checkSkills(settings.skills, await app.skillStore()),
    });
  } finally {
    await app.close();
  }
  if (options.json) printJson(report);
  // Everything in the report may quote a server, a config file or an engine: escaped before it is shown.
  else process.stdout.write(renderReport(escapeDeep(report), colors()));
  return report.ok ? 0 : 1;
}

/** The report as terminal text: one table per section, then one fix line per problem. */
export function renderReport(report: DoctorReport, c: Colors): string {
  const install = report.install ? ` (${report.install})` : "";
  const out: string[] = [c.bold(`codemode ${report.version}${install} doctor`), ""];
  const section = (title: string, body: string) => out.push(c.bold(title), body, "");

  section(
    `Runtimes${report.runtime ? ` (using ${report.runtime})` : ""}`,
    table(
      ["", "runtime", "version", "mode", "image", "sandbox", "seccomp", "isolation"],
      report.runtimes.map((r) => [
        mark(r.status, c),
        r.name,
        r.version ?? (r.notUsed ? "not used" : r.installed ? "?" : "not installed"),
        r.rootless === undefined ? "" : r.rootless ? "rootless" : "rootful",
        r.image ? `${r.image.ref}${r.image.present ? "" : " (missing)"}` : "",
        sandboxCell(r),
        seccompCell(r),
        isolationCell(r),
      ]),
      c,
    ) + (report.runtimeReason ? `\n${c.dim(`Why ${report.runtime}: ${report.runtimeReason}`)}` : ""),
  );

  // The isolation in force, and the facts that prove it (docs/security.md#gvisor).
  const proof = report.isolation.proof;
  out.push(
    `${c.bold("Isolation")}  ${
      proof ? mark(proof.proven ? "ok" : "fail", c) : mark(report.runtime ? "ok" : "fail", c)
    } ${report.isolation.setting === "gvisor" ? "gVisor (CODEMODE_ISOLATION=gvisor)" : "container"}${
      proof ? ` in ${report.runtime}: ${proof.expected}${proof.proven ? ", proven" : ", NOT proven"}` : ""
    }`,
  );
  for (const fact of proof?.facts ?? []) {
    out.push(`  ${fact.startsWith("NOT: ") ? c.red(fact) : c.dim(fact)}`);
  }
  out.push("");

  // The libraries of the image each working sandbox runs: what data work the sandbox can do.
  const withLibraries = report.runtimes.filter((r) => r.sandbox?.libraries);
  if (withLibraries.length) {
    out.push(c.bold("Sandbox libraries"));
    for (const r of withLibraries) {
      const where = r.image ? `${r.name} (${r.image.ref})` : r.name;
      out.push(`  ${where}: ${describeLibraries(r.sandbox!.libraries!)}`);
    }
    if (withLibraries.some((r) => Object.values(r.sandbox!.libraries!).includes(null) && r.image)) {
      out.push(c.dim("  codemode image build makes the image with all of them (--minimal: python3 alone)"));
    }
    out.push("");
  }

  const s = report.stateDir;
  const state = s.exists
    ? (s.writable ? "writable" : "not writable")
    : s.writable
    ? "created on first use"
    : "cannot be created";
  const stamp = s.stamp ? `, codemode ${s.stamp.version}'s, format ${s.stamp.format}` : "";
  out.push(`${c.bold("State directory")}  ${mark(s.status, c)} ${s.path} (${state}${stamp})`, "");

  const f = report.configFile;
  out.push(
    `${c.bold("codemode config")}  ${mark(f.status, c)} ${
      f.path ?? c.dim(`none (looked for ${f.searched.join(", ")})`)
    }${f.status === "fail" ? " (unreadable, see below)" : ""}`,
    "",
  );

  section(
    "Config files",
    report.configs.length
      ? table(
        ["", "file", "client", "servers", "diagnostics"],
        report.configs.map((f) => [
          mark(f.status, c),
          f.path,
          f.plugin ?? "",
          f.servers.join(", "),
          f.diagnostics.map((d) => `${d.server ? `${d.server}: ` : ""}${d.message}`).join("\n"),
        ]),
        c,
      )
      : c.dim("No MCP client config files found (see `codemode servers` for where codemode looks)"),
  );

  section(
    "Servers",
    report.servers.length
      ? table(
        ["", "server", "tools", "time", "source"],
        report.servers.map((v) => [
          mark(v.status, c),
          v.name,
          v.tools !== undefined
            ? String(v.tools) + (v.auth === "logged-in" ? " (logged in)" : "")
            : v.status === "fail"
            ? "failed (see below)"
            : v.auth === "needs-login"
            ? `needs a login: ${v.problem?.fix?.replace(/^Run /, "") ?? ""}`
            : v.problem?.message ?? "",
          v.ms === undefined ? "" : formatMs(v.ms),
          v.source,
        ]),
        c,
      )
      : c.dim("No servers configured"),
  );

  section(
    "Settings",
    table(
      ["", "variable", "value", "from", "meaning"],
      report.settings.map((v) => [
        mark(v.status, c),
        v.env,
        v.value === undefined ? c.dim("(unset)") : String(v.value),
        v.source,
        v.doc,
      ]),
      c,
    ),
  );

  section("Policy", renderPolicy(report, c));
  if (report.skills) section(`Skills (CODEMODE_SKILLS=${report.skills.mode})`, renderSkills(report, c));

  section(
    "Mounts",
    report.mounts.length
      ? table(
        ["", "host folder", "sandbox path", "mode", "how"],
        report.mounts.map((m) => [mark(m.status, c), m.host, m.target, m.mode, m.how]),
        c,
      )
      : c.dim("No host folders are mounted (CODEMODE_MOUNTS, or mounts: in the config file)"),
  );

  section("Tracing", renderTracing(report, c));

  const problems = report.findings.filter((f) => f.status !== "ok" && f.status !== "info");
  if (problems.length === 0) {
    out.push(`${mark("ok", c)} Everything works`);
  } else {
    out.push(c.bold("Problems"));
    for (const f of problems) {
      out.push(`${mark(f.status, c)} ${f.subject}: ${f.message}`);
      if (f.fix) out.push(`  ${c.dim("fix:")} ${f.fix}`);
    }
    const broken = problems.filter((f) => f.status === "fail").length;
    out.push(
      "",
      broken
        ? c.red(`${broken} broken, ${problems.length - broken} warnings`)
        : c.yellow(`${problems.length} warnings`),
    );
  }
  return out.join("\n") + "\n";
}

const UNITS: Record<string, string> = {
  maxOutput: " bytes per stream",
  maxDisplay: " bytes per run",
  maxTimeout: "s",
  confirmTimeout: "s",
};
/** How an unset rule reads, where "(no limit)" would be wrong. */
const UNSET: Record<string, string> = { confirm: "(none)" };

/** The policy rules with where each came from, then the configured servers it refuses. */
function renderPolicy(report: DoctorReport, c: Colors): string {
  const p = report.policy;
  const value = (v: unknown, key: string) =>
    v === undefined
      ? c.dim(UNSET[key] ?? "(no limit)")
      : Array.isArray(v)
      ? (v.join(", ") || c.dim("(none)"))
      : String(v);
  const lines = [
    table(
      ["rule", "value", "from"],
      p.rules.map((
        r,
      ) => [
        r.key,
        value(r.value, r.key) + (UNITS[r.key] && r.value !== undefined ? UNITS[r.key] : ""),
        r.source,
      ]),
      c,
    ),
  ];
  if (p.open) lines.push(c.dim("Every configured server and tool is reachable from the sandbox"));
  for (const r of p.refusedServers) lines.push(`${mark("info", c)} ${r.reason}`);
  return lines.join("\n");
}

/** Whether runs are traced, where spans go and whether the collector answered. */
function renderTracing(report: DoctorReport, c: Colors): string {
  const t = report.tracing;
  if (!t.on) {
    return c.dim(
      "Off: set CODEMODE_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) to an OTLP/HTTP collector",
    );
  }
  const answer = t.answered ? `answered in ${formatMs(t.ms ?? 0)}` : "did not answer";
  return table(
    ["", "collector", "from", "answer", "content"],
    [[mark(t.status, c), t.url ?? "", t.from ?? "", answer, t.content ? "code, arguments, results" : "no"]],
    c,
  );
}

/** The skill directories with how many skills each gave; problems are listed with the others. */
function renderSkills(report: DoctorReport, c: Colors): string {
  const s = report.skills!;
  if (s.mode === "off") return c.dim("Skills are off: nothing is loaded, saved or served");
  const lines = [
    table(
      ["", "directory", "kind", "skills"],
      s.dirs.map((d) => [mark("ok", c), d.path, d.kind, String(d.skills)]),
      c,
    ),
  ];
  if (s.mode === "ro") lines.push(c.dim("Read-only: skills load, but sandbox code cannot save them"));
  return lines.join("\n");
}

function isolationCell(r: RuntimeCheck): string {
  if (!r.isolation) return "";
  return r.isolation.expected +
    (r.isolation.expected === "gvisor" && !r.isolation.proven ? " (not proven)" : "");
}

function seccompCell(r: RuntimeCheck): string {
  const s = r.sandbox?.seccomp;
  if (!s) return "";
  return s.codemode ? "codemode" : s.mode === "filter" ? "other" : "none";
}

function sandboxCell(r: RuntimeCheck): string {
  if (!r.sandbox) return r.installed ? "not tried" : "";
  if (!r.sandbox.ok) return "failed";
  return `ok (start ${formatMs(r.sandbox.startMs ?? 0)}, run ${formatMs(r.sandbox.runMs ?? 0)})`;
}
