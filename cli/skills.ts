/**
 * `codemode skills list|show <name>|rm <name>|check`: the saved skills of every skill directory. `check`
 * reads each skill's code with Python's `ast` inside a sandbox and checks its tool calls against the
 * servers' current tools (see core/skills/check.ts); it exits 1 when anything is found.
 * @module
 */
import { join } from "node:path";
import { loadSettings, type Settings, SettingsError } from "../core/config/settings.ts";
import { configureLog } from "../core/observe/log.ts";
import { type LocalSkill, SkillStore } from "../core/skills/store.ts";
import { CODE_FILE, MANIFEST_FILE } from "../core/skills/store.ts";
import { skillRoots } from "../core/skills/sources.ts";
import { removeSkill, SkillWriteError } from "../core/skills/save.ts";
import { checkCalls, type SkillCall, type SkillFinding } from "../core/skills/check.ts";
import { type ToolDoc, toolDoc } from "../core/catalog/docs.ts";
import { colors, mark, printJson, table } from "./_render.ts";
import { escapeControls, escapeDeep } from "./_terminal_guard.ts";

/** Flags every skills subcommand takes. */
export interface SkillsOptions {
  json?: boolean;
}

/** `codemode skills list`. */
export async function list(opts: SkillsOptions): Promise<number> {
  const store = await openStore();
  if (typeof store === "number") return store;
  const found = store.skills();
  if (opts.json) {
    printJson({ skills: found.map(publicSkill), diagnostics: store.diagnostics() });
    return 0;
  }
  const c = colors();
  // Names and descriptions come from SKILL.md files sandbox code may have written.
  const skills = escapeDeep(found.map((s) => ({ ...s })));
  if (!skills.length) {
    process.stdout.write(
      `No skills yet. Sandbox code saves them with runtime.save_skill(); codemode looks in:\n${
        store.roots.map((r) => `  ${r.path} (${r.kind})`).join("\n")
      }\n`,
    );
  } else {
    process.stdout.write(
      table(
        ["skill", "import", "kind", "description", "directory"],
        skills.map((s) => [
          c.green(s.name),
          `skills.${s.module}`,
          s.hasCode ? "code" : "docs",
          s.description,
          s.root.kind,
        ]),
        c,
      ) + "\n",
    );
  }
  printDiagnostics(store);
  return 0;
}

/** `codemode skills show <name>`: the SKILL.md and the code. */
export async function show(name: string, opts: SkillsOptions): Promise<number> {
  const store = await openStore();
  if (typeof store === "number") return store;
  const skill = store.find(name);
  if (!skill) return notFound(name, store);
  const manifest = await store.readText(skill.name, MANIFEST_FILE);
  const code = skill.hasCode ? await store.readText(skill.name, CODE_FILE) : null;
  if (opts.json) {
    printJson({ ...publicSkill(skill), skill_md: manifest, code });
    return 0;
  }
  const c = colors();
  process.stdout.write(
    `${c.dim(`# ${escapeControls(join(skill.root.path, skill.name, MANIFEST_FILE))}`)}\n${
      escapeControls(manifest)
    }`,
  );
  if (code !== null) {
    process.stdout.write(
      `\n${c.dim(`# ${escapeControls(join(skill.root.path, skill.name, CODE_FILE))}`)}\n${
        escapeControls(code)
      }`,
    );
  }
  if (!(code ?? manifest).endsWith("\n")) process.stdout.write("\n");
  return 0;
}

/** `codemode skills rm <name>`. */
export async function rm(name: string, opts: SkillsOptions): Promise<number> {
  const store = await openStore();
  if (typeof store === "number") return store;
  if (!store.find(name)) return notFound(name, store);
  try {
    const removed = await removeSkill(store, name);
    const path = join(removed.root.path, removed.name);
    if (opts.json) printJson({ removed: removed.name, path });
    else process.stdout.write(`Removed skill "${removed.name}" (${path})\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof SkillWriteError)) throw error;
    process.stderr.write(`codemode skills rm: ${error.message}\n`);
    return 1;
  }
}

/** What `skills check` found, for `--json`. */
export interface CheckReport {
  skills: number;
  findings: SkillFinding[];
  /** Servers whose tools could not be listed, so calls to them were not checked. */
  unchecked: string[];
  diagnostics: { path: string; message: string }[];
}

/** `codemode skills check`: exit 1 when any skill's code does not parse or calls what does not exist. */
export async function check(opts: SkillsOptions): Promise<number> {
  const settings = settingsOrExit();
  if (typeof settings === "number") return settings;
  const store = await openStore(settings);
  if (typeof store === "number") return store;
  const coded = store.skills().filter((s) => s.hasCode);
  const report: CheckReport = {
    skills: coded.length,
    findings: [],
    unchecked: [],
    diagnostics: store.diagnostics(),
  };
  if (coded.length) {
    const { createCodemode } = await import("../mod.ts");
    const app = await createCodemode({ settings, indexInBackground: false });
    try {
      const listed = new Map<string, Promise<ToolDoc[] | undefined>>();
      const tools = (server: string) => {
        // The servers' tools as they are now: a cached listing could hide the drift this looks for.
        if (!listed.has(server)) {
          listed.set(
            server,
            app.pool.listTools(server).then((t) => t.map((tool) => toolDoc(server, tool)), () => undefined),
          );
        }
        return listed.get(server)!;
      };
      // Servers a saved skill names in its frontmatter start while the sandbox reads the code.
      const configured = new Set(app.servers.map((s) => s.name));
      for (const skill of coded) {
        const named = Array.isArray(skill.frontmatter.servers) ? skill.frontmatter.servers : [];
        for (const server of named) if (configured.has(String(server))) void tools(String(server));
      }
      const analyses = await analyseInSandbox(app, coded);
      if (typeof analyses === "string") {
        process.stderr.write(`codemode skills check: ${analyses}; run \`codemode doctor\` for a diagnosis\n`);
        return 1;
      }
      const unchecked = new Set<string>();
      for (const skill of coded) {
        const file = join(skill.root.path, skill.name, CODE_FILE);
        const analysis = analyses.get(skill.name);
        if (!analysis) continue;
        if (analysis.error) {
          report.findings.push({
            skill: skill.name,
            file,
            line: analysis.error.line,
            kind: "syntax",
            message: analysis.error.message,
          });
          continue;
        }
        const result = await checkCalls(skill.name, file, analysis.calls, {
          servers: app.servers.map((s) => s.name),
          tools,
          policy: app.policy,
        });
        report.findings.push(...result.findings);
        for (const server of result.unchecked) unchecked.add(server);
      }
      report.unchecked = [...unchecked];
    } finally {
      await app.close();
    }
  }
  if (opts.json) printJson(report);
  else printCheck(report);
  return report.findings.length ? 1 : 0;
}

interface Analysis {
  calls: SkillCall[];
  error: { line: number; message: string } | null;
}

/** Each skill's calls, read by Python's `ast` in a sandbox (the host runs no Python), or why that failed. */
async function analyseInSandbox(
  app: import("../core/app.ts").Codemode,
  skills: LocalSkill[],
): Promise<Map<string, Analysis> | string> {
  const program = [
    "import json",
    "from mcp import runtime, _skill_code",
    `for name in json.loads(${JSON.stringify(JSON.stringify(skills.map((s) => s.name)))}):`,
    "    code = (await runtime.read_skill(name))['code'] or ''",
    "    result = _skill_code.analyse(code, f'<skill {name}>')",
    "    print(json.dumps({'skill': name, 'calls': result['calls'], 'error': result['error']}))",
  ].join("\n");
  let stdout = "";
  let result;
  try {
    result = await app.sessions.run("skills-check", program, {
      timeout: app.settings.maxTimeout,
      onOutput: (stream, text) => void (stream === "stdout" && (stdout += text)),
    });
  } catch (error) {
    return `no sandbox to read the skills in: ${(error as Error).message ?? error}`;
  }
  if (result.status !== "ok") return `reading the skills failed: ${result.error ?? result.status}`;
  const analyses = new Map<string, Analysis>();
  for (const line of stdout.split("\n")) {
    if (!line.trim()) continue;
    const parsed = JSON.parse(line) as Analysis & { skill: string };
    analyses.set(parsed.skill, { calls: parsed.calls ?? [], error: parsed.error ?? null });
  }
  return analyses;
}

/** Findings as a table on a terminal, else one `file:line: message` line each (as compilers print them). */
function printCheck(report: CheckReport): void {
  const c = colors();
  if (report.findings.length && process.stdout.isTTY) {
    process.stdout.write(
      table(
        ["", "skill", "line", "problem"],
        report.findings.map((f) => [mark("fail", c), f.skill, String(f.line), f.message]),
        c,
      ) + "\n",
    );
  } else {
    for (const f of report.findings) process.stdout.write(`${f.file}:${f.line}: ${f.message}\n`);
  }
  const warn = colors(process.stderr);
  for (const server of report.unchecked) {
    process.stderr.write(
      `${mark("warn", warn)} calls to "${server}" were not checked: its tools could not be listed\n`,
    );
  }
  for (const d of report.diagnostics) process.stderr.write(`${mark("warn", warn)} ${d.path}: ${d.message}\n`);
  const summary = `${report.skills} skill${report.skills === 1 ? "" : "s"} with code checked, ` +
    `${report.findings.length} finding${report.findings.length === 1 ? "" : "s"}`;
  process.stdout.write((report.findings.length ? c.red(summary) : `${mark("ok", c)} ${summary}`) + "\n");
}

function publicSkill(skill: LocalSkill) {
  return {
    name: skill.name,
    module: skill.module,
    description: skill.description,
    kind: skill.hasCode ? "code" : "docs",
    directory: skill.root.kind,
    path: join(skill.root.path, skill.name),
    files: skill.files.map((f) => f.path),
    frontmatter: skill.frontmatter,
  };
}

function printDiagnostics(store: SkillStore): void {
  const c = colors(process.stderr);
  for (const d of store.diagnostics()) process.stderr.write(`${mark("warn", c)} ${d.path}: ${d.message}\n`);
}

function notFound(name: string, store: SkillStore): number {
  const known = store.skills().map((s) => s.name);
  process.stderr.write(
    `codemode skills: no skill named "${name}"; ${
      known.length ? `there are: ${known.join(", ")}` : "none is saved yet"
    }\n`,
  );
  return 1;
}

function settingsOrExit(): Settings | number {
  try {
    const settings = loadSettings();
    configureLog({ level: settings.logLevel, file: settings.logFile });
    return settings;
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    process.stderr.write(`codemode skills: ${error.message}\n`);
    return 2;
  }
}

/** The loaded skills, or the exit code when skills are off or the settings are bad. */
async function openStore(given?: Settings): Promise<SkillStore | number> {
  const settings = given ?? settingsOrExit();
  if (typeof settings === "number") return settings;
  if (settings.skills === "off") {
    process.stderr.write("codemode skills: skills are turned off (CODEMODE_SKILLS=off)\n");
    return 1;
  }
  return await SkillStore.open({
    roots: skillRoots({ dirs: settings.skillDirs, userDir: settings.skillsDir }),
    mode: settings.skills,
  });
}
