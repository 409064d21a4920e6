/**
 * The question asked before a registry server is added: exactly what will run (the command line or the
 * URL), which environment variables and headers it gets (their names and who sets each, never a value:
 * a value set by sandbox code could word the question for it), and a form field for each value only the
 * user may give: every
 * secret, every required input without a default, and the arguments the entry leaves open. What the
 * user answers is checked here before anything starts.
 * @module
 */
import { commandLine, type LaunchInput, type LaunchPlan, valueProblem } from "../registry/launch.ts";
import type { ApprovalField, ApprovalRequest, ApprovalScope } from "./approvals.ts";

/** What a person chooses between: this session only, or keeping the server in codemode's config file. */
export const ADD_SCOPES: readonly ApprovalScope[] = [
  { value: "session", title: "For this session" },
  { value: "keep", title: "Keep it: add it to codemode's config file (values included, file mode 0600)" },
];

/** An input the question asks the user for, and the form field it is. */
export interface AskedInput {
  input: LaunchInput;
  field: ApprovalField;
}

/** What the question is built from. */
export interface AddQuestion {
  /** The registry name and version. */
  name: string;
  version: string;
  alias: string;
  /** The registry's host. */
  registry: string;
  description?: string;
  plan: LaunchPlan;
  /** Values sandbox code gave (non-secret variables the entry declares). */
  given: Record<string, string>;
  /** Why the user is asked (the setting, and where it was set). */
  reason: string;
}

/** The inputs nobody has given a value for that the user may: each becomes a form field. */
export function askedInputs(plan: LaunchPlan, given: Record<string, string>): AskedInput[] {
  const used = new Set<string>(["approve", "scope"]);
  return plan.inputs.filter((i) => i.fixed === undefined && !(i.kind === "env" && i.name in given)).map(
    (input) => {
      let name = `${input.kind}_${input.name.replace(/^-+/, "").replace(/[^A-Za-z0-9_]/g, "_")}`;
      while (used.has(name)) name += "_";
      used.add(name);
      const label = input.kind === "env"
        ? "Environment variable"
        : input.kind === "header"
        ? "Header"
        : "Argument";
      return {
        input,
        field: {
          name,
          title: `${label} ${input.name}${input.secret ? " (secret)" : ""}${
            input.required ? "" : " (optional)"
          }`,
          ...(input.description ? { description: input.description } : {}),
          required: input.required && input.default === undefined,
          ...(input.default !== undefined && !input.secret ? { default: input.default } : {}),
          ...(input.choices?.length ? { choices: input.choices } : {}),
        },
      };
    },
  );
}

/** The approval request for adding a server. */
export function addRequest(q: AddQuestion, asked: AskedInput[]): ApprovalRequest {
  const runs = commandLine(q.plan);
  const lines = [
    `Sandbox code wants to add the MCP server "${q.name}" (version ${q.version}) from the registry at ` +
    `${q.registry}, as mcp_${q.alias}.`,
    q.plan.type === "remote" ? `It connects to: ${runs}` : `It runs: ${runs}`,
    ...inputLines(q.plan, q.given),
    ...q.plan.notes,
    ...(q.description ? [`The registry describes it as: ${q.description}`] : []),
    "Nothing else from the entry runs; a local server starts with codemode's safe environment.",
  ];
  return {
    kind: "add_server",
    server: q.alias,
    tool: q.name,
    summary: runs,
    reason: q.reason,
    text: lines.join("\n"),
    subject: `Adding the MCP server "${q.name}"`,
    scopes: ADD_SCOPES,
    fields: asked.map((a) => a.field),
    fallback: "deny",
  };
}

/**
 * The values the user gave, by input name, or why they cannot be used (a required one left empty, a
 * value that breaks the rules for its input).
 */
export function answeredValues(
  asked: AskedInput[],
  values: Record<string, string> = {},
): { values: Record<string, string> } | { problem: string } {
  const out: Record<string, string> = {};
  for (const { input, field } of asked) {
    const value = values[field.name] ?? "";
    if (!value) {
      if (field.required) return { problem: `${describe(input)} is required, and no value was given` };
      continue;
    }
    const problem = valueProblem(input, value);
    if (problem) return { problem: `the value given for ${describe(input)} cannot be used: ${problem}` };
    out[input.name] = value;
  }
  return { values: out };
}

function inputLines(plan: LaunchPlan, given: Record<string, string>): string[] {
  const shown = (i: LaunchInput) => {
    if (i.fixed !== undefined) return `${i.name} (set by the entry)`;
    if (i.name in given && i.kind === "env") return `${i.name} (set by sandbox code)`;
    const what = i.secret ? "secret, " : "";
    return `${i.name} (${what}${i.required ? "required" : "optional"}: you fill it in below)`;
  };
  const env = plan.inputs.filter((i) => i.kind === "env").map(shown);
  const headers = plan.inputs.filter((i) => i.kind === "header").map(shown);
  return [
    ...(env.length ? [`Environment variables: ${env.join(", ")}`] : []),
    ...(headers.length ? [`Headers: ${headers.join(", ")}`] : []),
  ];
}

function describe(input: LaunchInput): string {
  return `${
    input.kind === "env" ? "the variable" : input.kind === "header" ? "the header" : "the argument"
  } ${input.name}`;
}
