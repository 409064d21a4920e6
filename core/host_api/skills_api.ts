/**
 * The skill methods sandbox code calls (through `runtime.list_skills`, `read_skill`, `save_skill` and the
 * `skills` importer): local skills from the skill directories, skills upstream servers publish, saving,
 * and the import-time drift check whose findings become notes on the run's result. No host path crosses:
 * a skill is named by its name, never by where it lives.
 * @module
 */
import type { ToolDoc } from "../catalog/docs.ts";
import type { SkillStore } from "../skills/store.ts";
import { CODE_FILE, MANIFEST_FILE } from "../skills/names.ts";
import { checkCalls, type SkillCall } from "../skills/check.ts";
import type { Policy } from "../config/policy.ts";
import type { SkillsMode } from "../skills/sources.ts";
import { RpcError, type RpcHandler } from "./rpc.ts";
import { inSpan } from "../observe/trace.ts";

/** One RPC method: params and the call's context in, a JSON value out. */
export type RpcMethod = (
  params: Record<string, unknown>,
  context: Parameters<RpcHandler>[2],
) => Promise<unknown>;

/** What the skill methods need from the rest of the host. */
export interface SkillsApiDeps {
  mode: SkillsMode;
  /** The local skills, loaded on first use; undefined when skills are off. */
  store?: () => Promise<SkillStore | undefined>;
  /** Upstream skills: what servers publish, and their files (verified by the SDK). */
  upstream: {
    readSkill(server: string, skill: string, file?: string): Promise<{ text?: string; files: string[] }>;
  };
  /** Skill docs known to the catalog (local and upstream), for listings without starting servers. */
  skillDocs(): ToolDoc[];
  /** A server's tool docs for the drift check; undefined when they can't be had. */
  toolDocs(server: string): Promise<ToolDoc[] | undefined>;
  policy: Policy;
  /** Resolves a server name or alias under the policy (throws the RpcError sandbox code should get). */
  resolveServer(name: string): string;
  /** The servers sandbox code may use. */
  allowedServers(): string[];
}

/** Most findings turned into notes on one run: a skill with hundreds of broken calls needs `skills check`. */
const MAX_NOTES = 20;

/** The skill RPC methods, by name. */
export function skillMethods(deps: SkillsApiDeps): Record<string, RpcMethod> {
  const store = async (): Promise<SkillStore> => {
    const loaded = deps.mode === "off" ? undefined : await deps.store?.();
    if (!loaded) throw new RpcError("PermissionError", "Skills are turned off here (CODEMODE_SKILLS=off)");
    return loaded;
  };
  const localSkill = async (name: string) => {
    const skills = await store();
    await skills.fresh();
    const skill = skills.find(name);
    if (!skill) {
      const known = skills.skills().map((s) => s.name);
      throw new RpcError(
        "KeyError",
        `No skill named "${name}"; saved skills: ${known.slice(0, 30).join(", ") || "none"}` +
          (known.length > 30 ? ", ..." : ""),
      );
    }
    return { skills, skill };
  };

  async function readSkill(params: Record<string, unknown>) {
    const name = stringParam(params, "name");
    await store();
    const slash = name.indexOf("/");
    if (slash >= 0) return await upstreamSkill(deps, name.slice(0, slash), name.slice(slash + 1));
    const { skills, skill } = await localSkill(name);
    const has = (file: string) => skill.files.some((f) => f.path === file);
    return {
      name: skill.name,
      module: skill.module,
      description: skill.description,
      frontmatter: skill.frontmatter,
      skill_md: await skills.readText(skill.name, MANIFEST_FILE),
      code: has(CODE_FILE) ? await skills.readText(skill.name, CODE_FILE) : null,
      digest: skill.files.find((f) => f.path === CODE_FILE)?.digest ?? null,
      files: skill.files.map((f) => f.path),
    };
  }

  async function checkSkillCalls(params: Record<string, unknown>, context: Parameters<RpcMethod>[1]) {
    await store();
    const skill = stringParam(params, "skill");
    const calls = Array.isArray(params.calls) ? params.calls as SkillCall[] : [];
    const { findings } = await checkCalls(skill, `${skill}/${CODE_FILE}`, calls, {
      servers: deps.allowedServers(),
      tools: deps.toolDocs,
      policy: deps.policy,
    });
    for (const finding of findings.slice(0, MAX_NOTES)) {
      context.note?.(`skill "${skill}" line ${finding.line}: ${finding.message}`);
    }
    if (findings.length > MAX_NOTES) {
      context.note?.(
        `skill "${skill}": ${findings.length - MAX_NOTES} more findings; run codemode skills check`,
      );
    }
    return findings.map(({ line, kind, message }) => ({ line, kind, message }));
  }

  return {
    async list_skills() {
      const skills = await store();
      await skills.fresh();
      const local = skills.skills().map((s) => ({
        name: s.name,
        module: s.module,
        description: s.description,
        has_code: s.hasCode,
        ...(s.hasCode ? { digest: s.files.find((f) => f.path === CODE_FILE)?.digest } : {}),
      }));
      const allowed = new Set(deps.allowedServers());
      const upstream = deps.skillDocs()
        .filter((d) => d.tool.includes("/") && allowed.has(d.tool.slice(0, d.tool.indexOf("/"))))
        .map((d) => ({
          name: d.tool,
          server: d.tool.slice(0, d.tool.indexOf("/")),
          description: d.description,
        }));
      return [...local, ...upstream];
    },

    async save_skill(params) {
      // Loaded here, not at the top: it needs the SDK's server side, which most runs never use.
      const { saveSkill, SkillWriteError } = await import("../skills/save.ts");
      try {
        return await saveSkill(await store(), {
          name: stringParam(params, "name"),
          code: stringParam(params, "code"),
          description: typeof params.description === "string" ? params.description : "",
          overwrite: params.overwrite === true,
          // Only names of servers sandbox code may use are recorded; anything else is dropped.
          servers: stringList(params.servers).filter((s) => deps.allowedServers().includes(s)),
          functions: Array.isArray(params.functions) ? params.functions : [],
        });
      } catch (error) {
        if (error instanceof SkillWriteError) throw new RpcError(error.pythonType, error.message);
        throw error;
      }
    },

    // The `skills` importer reads a skill (here), then has its calls checked: each a span of the run.
    read_skill: (params) => inSpan("skill.read", skillAttributes(params.name), () => readSkill(params)),
    check_skill_calls: (params, context) =>
      inSpan("skill.check", skillAttributes(params.skill), () => checkSkillCalls(params, context)),
  };
}

/** A skill an upstream server publishes: its SKILL.md, and its skill.py if it has one. */
async function upstreamSkill(deps: SkillsApiDeps, serverName: string, name: string) {
  const server = deps.resolveServer(serverName);
  try {
    const manifest = await deps.upstream.readSkill(server, name);
    const code = manifest.files.includes(CODE_FILE)
      ? (await deps.upstream.readSkill(server, name, CODE_FILE)).text ?? null
      : null;
    const description = deps.skillDocs().find((d) => d.tool === `${server}/${name}`)?.description;
    return {
      name: `${server}/${name}`,
      server,
      description: description ?? null,
      skill_md: manifest.text ?? "",
      code,
      files: manifest.files,
    };
  } catch (error) {
    if (error instanceof RangeError) throw new RpcError("KeyError", error.message);
    throw error;
  }
}

/** A skill's span names the skill (a name sandbox code gave, clipped). */
function skillAttributes(name: unknown) {
  return { "codemode.skill": typeof name === "string" ? name.slice(0, 200) : undefined };
}

function stringParam(params: Record<string, unknown>, key: string): string {
  const value = params[key];
  if (typeof value !== "string" || !value) {
    throw new RpcError("ValueError", `"${key}" must be a non-empty string`);
  }
  return value;
}

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string").slice(0, 100) : [];
}
