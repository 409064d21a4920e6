/**
 * Section "skills" (issue 14): the first import of a skill in a fresh session (code over the channel plus
 * the import-time drift check) against the first import of a small stdlib module in the same sessions;
 * search over 1,000 tools plus 100 skills against the same 1,000 tools alone; loading 100 skills; and
 * whole `codemode skills check` processes over 100 skills against `codemode run` of an empty program
 * that starts the same sandbox and server (hyperfine).
 * @module
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toolDoc } from "../core/catalog/docs.ts";
import { ToolIndex } from "../core/catalog/index.ts";
import { SkillStore } from "../core/skills/store.ts";
import { benchQueries } from "./bench_search.ts";
import { syntheticCatalog } from "./synthetic_catalog.ts";
import { syntheticSkills, writeSkills } from "./synthetic_skills.ts";
import {
  catalogIndexed,
  exec,
  fakeHome,
  IMAGE,
  percentile,
  referenceServers,
  removeHome,
  removeLeftovers,
  row,
  type SectionResult,
  sourceCommand,
  works,
} from "./bench_harness.ts";
import { benchProcess } from "./bench_search.ts";

/** Counts of the skills section. */
export const counts = {
  freshSessions: 8,
  searchPasses: 20,
  skills: 100,
  tools: 1000,
  checkRuns: 5,
  cliRuns: 10,
};

const TIDES = `async def predict(port: str) -> str:
    """High water for a port, through server-everything."""
    return await mcp_everything.echo(message=f"high water at {port}")
`;

/** Runs the skills section. */
export async function benchSkills(): Promise<SectionResult> {
  const result: SectionResult = { name: "skills", rows: [], notes: [] };
  result.rows.push(...await searchRows(result));
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.notes.push(`podman or ${IMAGE} is missing: the import and check figures were not taken`);
    return result;
  }
  result.rows.push(await firstImportRow(result));
  result.rows.push(await checkRow(result));
  const left = await removeLeftovers();
  if (left.length) result.notes.push(`removed ${left.length} leftover containers: ${left.join(", ")}`);
  return result;
}

/** In-process search: 1,000 synthetic tools with and without 100 skills loaded from disk. */
async function searchRows(result: SectionResult) {
  const dir = mkdtempSync(join(tmpdir(), "codemode-bench-skills-"));
  try {
    writeSkills(dir, syntheticSkills(counts.skills));
    const loadStart = performance.now();
    const store = await SkillStore.open({ roots: [{ path: dir, kind: "user" }], mode: "rw" });
    const loadMs = performance.now() - loadStart;
    const tools = syntheticCatalog(counts.tools).flatMap(({ server, tools }) =>
      tools.map((t) => toolDoc(server, t))
    );
    const skillDocs = store.docs().map((d) => ({ ...d, kind: "skill" as const }));
    const queries = [...benchQueries(), ...syntheticSkills(20).map((s) => s.description.split(",")[0])];
    const time = (docs: typeof tools) => {
      const index = new ToolIndex(docs, { cacheSize: 0 });
      for (const q of queries) index.search(q, { limit: 10 });
      const times: number[] = [];
      for (let pass = 0; pass < counts.searchPasses; pass++) {
        for (const q of queries) {
          const start = performance.now();
          index.search(q, { limit: 10 });
          times.push(performance.now() - start);
        }
      }
      return { p50: percentile(times, 0.5), p95: percentile(times, 0.95) };
    };
    const both = time([...tools, ...skillDocs]);
    const toolsOnly = time(tools);
    // A skill's own description as the query should find that skill first.
    const index = new ToolIndex([...tools, ...skillDocs]);
    const skills = syntheticSkills(counts.skills);
    const found = skills.filter((s) => index.search(s.description, { limit: 1 })[0]?.tool === s.name).length;
    result.notes.push(
      `search: ${queries.length} queries (the labelled tool queries plus 20 skill descriptions) × ${counts.searchPasses}; ` +
        `a skill's own description finds it first for ${found} of ${skills.length} skills`,
    );
    return [
      row({
        section: "skills",
        metric: `in-process search p50, ${counts.tools} tools + ${store.skills().length} skills`,
        value: both.p50,
        unit: "ms",
        baseline: { label: `the same ${counts.tools} tools alone`, value: toolsOnly.p50 },
        goal: { on: "value", op: "≤", limit: 2 },
        note: `p95 ${both.p95.toFixed(3)} ms (tools alone ${toolsOnly.p95.toFixed(3)} ms)`,
      }),
      row({
        section: "skills",
        metric: `loading ${store.skills().length} skills (SDK catalog: read, hash, check)`,
        value: loadMs,
        unit: "ms",
        note: "once at serve start; later loads only when a stat of the directories changes",
      }),
      await cliSearchRow(),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `codemode search --json` with the 100 skills in the user's skills directory, against no skills. */
async function cliSearchRow() {
  const home = fakeHome(() => ({}));
  const bare = fakeHome(() => ({}));
  try {
    const userDir = join(home, ".config", "codemode", "skills");
    mkdirSync(userDir, { recursive: true });
    writeSkills(userDir, syntheticSkills(counts.skills));
    const command = [...sourceCommand(), "search", "release notes", "--json"];
    const withSkills = await benchProcess(command, {
      runs: counts.cliRuns,
      cwd: home,
      env: { HOME: home, CODEMODE_STATE_DIR: join(home, "state") },
    });
    const without = await benchProcess(command, {
      runs: counts.cliRuns,
      cwd: bare,
      env: { HOME: bare, CODEMODE_STATE_DIR: join(bare, "state") },
    });
    return row({
      section: "skills",
      metric: `codemode search --json from source with ${counts.skills} skills, p50 of ${counts.cliRuns}`,
      value: withSkills.p50Ms,
      unit: "ms",
      baseline: { label: "the same search with no skill directory", value: without.p50Ms },
      note: `p95 ${
        withSkills.p95Ms.toFixed(0)
      } ms; no MCP server configured, so the difference is the skills`,
    });
  } finally {
    removeHome(home);
    removeHome(bare);
  }
}

/** The first `from skills import ...` in fresh sandboxes of a real serve, against a stdlib first import. */
async function firstImportRow(result: SectionResult) {
  const { startServe } = await import("./bench_harness.ts");
  const home = fakeHome(referenceServers);
  const dir = join(home, ".config", "codemode", "skills", "tide-tables");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "SKILL.md"), "---\nname: tide-tables\ndescription: Predict high water\n---\n");
  writeFileSync(join(dir, "skill.py"), TIDES);
  const served = await startServe({ home, env: { CODEMODE_RUNTIME: "podman", CODEMODE_LOG_LEVEL: "warn" } });
  try {
    await catalogIndexed(home, 3);
    const skill: number[] = [];
    const stdlib: number[] = [];
    const timed = async (code: string) => {
      const start = performance.now();
      await served.run(code);
      return performance.now() - start;
    };
    for (let i = 0; i <= counts.freshSessions; i++) {
      // Killing the sandbox makes the next run start a fresh one (that start is not timed).
      await served.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)").catch(() => {});
      await served.run("pass");
      const pair = i % 2
        ? [await timed("from skills import tide_tables"), await timed("import colorsys")]
        : [await timed("import colorsys"), await timed("from skills import tide_tables")].reverse();
      if (i === 0) continue; // the first pair warms the host's caches
      skill.push(pair[0]);
      stdlib.push(pair[1]);
    }
    const check = await served.run("import sys\n'skills.tide_tables' in sys.modules");
    result.notes.push(
      `first import: ${counts.freshSessions} fresh podman sandboxes of one serve; the skill calls ` +
        `server-everything, so its import also runs the drift check (imported: ${check.text.trim()})`,
    );
    return row({
      section: "skills",
      metric: "first `from skills import tide_tables` in a fresh session, run_python round trip p50",
      value: percentile(skill, 0.5),
      unit: "ms",
      baseline: {
        label: "first `import colorsys` (stdlib, from the image) in the same sessions",
        value: percentile(stdlib, 0.5),
      },
      note: `p95 ${percentile(skill, 0.95).toFixed(1)} ms`,
    });
  } finally {
    await served.close();
    removeHome(home);
  }
}

/** Whole `codemode skills check` over 100 skills (hyperfine), against `codemode run` of an empty program. */
async function checkRow(result: SectionResult) {
  const home = fakeHome(referenceServers);
  try {
    writeSkills(join(home, ".config", "codemode", "skills"), syntheticSkills(counts.skills));
    writeFileSync(join(home, "empty.py"), "pass\n");
    const env = { HOME: home, CODEMODE_STATE_DIR: join(home, "state"), CODEMODE_RUNTIME: "podman" };
    const cmd = (args: string[]) => [...sourceCommand(), ...args].map((a) => `'${a}'`).join(" ");
    const json = join(home, "hyperfine.json");
    const r = await exec("env", [
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      "hyperfine",
      "--ignore-failure",
      "--warmup",
      "1",
      "--runs",
      String(counts.checkRuns),
      "--export-json",
      json,
      cmd(["skills", "check", "--json"]),
      cmd(["run", "--servers", "everything", join(home, "empty.py")]),
    ], 1_800_000);
    if (r.code !== 0) throw new Error(`hyperfine failed: ${r.stderr.slice(-500)}`);
    const [check, run] =
      (JSON.parse(readFileSync(json, "utf8")) as { results: { median: number; max: number }[] })
        .results;
    const report = await exec("env", [
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      ...sourceCommand(),
      "skills",
      "check",
      "--json",
    ], 600_000);
    const findings = (JSON.parse(report.stdout) as { findings: unknown[] }).findings.length;
    result.notes.push(
      `skills check: ${counts.skills} skills of 2 functions, 2-3 calls each to server-everything ` +
        `(${findings} findings: one skill in ten calls a retired tool); hyperfine, ${counts.checkRuns} runs after 1 warm-up`,
    );
    return row({
      section: "skills",
      metric: `codemode skills check --json over ${counts.skills} skills (podman), median`,
      value: check.median * 1000,
      unit: "ms",
      baseline: { label: "codemode run --servers everything of an empty program", value: run.median * 1000 },
      note: `max ${(check.max * 1000).toFixed(0)} ms`,
    });
  } finally {
    removeHome(home);
  }
}
