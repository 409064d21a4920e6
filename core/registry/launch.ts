/**
 * What a registry entry would run, decided from validated fields only: an npm package as
 * `npx -y <identifier>@<exact version>`, a PyPI package as `uvx --from <identifier>==<version>
 * <identifier>` (where uvx is installed), or a remote Streamable HTTP endpoint. Nothing an entry says is
 * ever run through a shell or passed unchecked: identifiers and versions must match strict patterns,
 * versions must be exact, a value starting with `-` never becomes an argument, `runtimeArguments` are
 * never passed, and `packageArguments` only as fixed argv elements (or values the user types in the
 * approval form). Variables that would change how npx or uvx itself behaves are refused. oci images are
 * refused: codemode does not run upstream servers in containers.
 * @module
 */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import type {
  EntryArgument,
  EntryKeyValue,
  EntryPackage,
  EntryTransport,
  RegistryEntry,
} from "./server_json.ts";
import { clean } from "./server_json.ts";

/** How an added server runs. */
export type RunType = "npm" | "pypi" | "oci" | "remote";

/** An input the server needs: an environment variable, an HTTP header or a command-line argument. */
export interface LaunchInput {
  /** The variable or header name; for an argument, its flag (`--port`) or value hint. */
  name: string;
  kind: "env" | "header" | "arg";
  required: boolean;
  secret: boolean;
  /** A value the entry fixes: used as is, nobody is asked. */
  fixed?: string;
  /** The entry's default, used when nobody gives a value. */
  default?: string;
  description?: string;
  choices?: string[];
  /** "filepath" asks for an absolute path. */
  format?: string;
  /** A named argument is passed as `<name>=<value>`; a positional one as the value alone. */
  position?: "named" | "positional";
}

/** What an entry runs once every input has its value. */
export interface LaunchPlan {
  type: RunType;
  /** npm and pypi: the command line, before arguments the user fills in. */
  command?: string[];
  /** remote: the endpoint. */
  url?: string;
  /** The package identifier (npm, pypi) or the URL's host (remote): what `npm:`/`pypi:`/`remote:` globs match. */
  target: string;
  /** The pinned version that runs (the package's; a remote's is the entry's). */
  version: string;
  inputs: LaunchInput[];
  /** Said in the question: what codemode leaves out of the entry (e.g. its runtime arguments). */
  notes: string[];
}

/** An entry codemode will not run, with what it would have run where that is known. */
export interface Unrunnable {
  why: string;
  type?: RunType;
  /** The package or host, for the policy's `npm:`/`pypi:`/`oci:`/`remote:` globs. */
  target?: string;
  /** What it would run, for find_servers' `run` (an oci image, a URL). */
  shown?: { command?: string[]; url?: string; image?: string };
}

/** What the host offers for running packages. */
export interface LaunchTools {
  /** Whether `uvx` is installed (PyPI packages run with it). */
  uvx: boolean;
}

/** What this machine offers: whether `uvx` is on PATH. */
export function launchTools(path = process.env.PATH ?? ""): LaunchTools {
  const onPath = (name: string) =>
    path.split(delimiter).some((dir) => {
      try {
        accessSync(join(dir, name), constants.X_OK);
        return Boolean(dir);
      } catch {
        return false;
      }
    });
  return { uvx: onPath("uvx") };
}

/** npm package names: lowercase, optionally scoped, no leading `.`, `_` or `-`, at most 214 characters. */
const NPM_NAME = /^(?:@[a-z0-9~][a-z0-9._~-]*\/)?[a-z0-9~][a-z0-9._~-]*$/;
/** An exact semantic version (no range, no tag). */
const SEMVER =
  /^(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;
/** PyPI project names (PEP 508), and an exact public version (PEP 440, no local part). */
const PYPI_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$/;
const PEP440 = /^(?:\d+!)?\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const HEADER_NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/;
const FLAG = /^--?[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/**
 * Variables an entry may not set: they change what npx, npm, uvx, pip, node or python run or where they
 * fetch from (a package pinned to a version means nothing if the registry it comes from can be swapped).
 */
const LAUNCHER_ENV =
  /^(?:PATH|HOME|TMPDIR|SHELL|NODE_.*|NPM_.*|COREPACK_.*|UV_.*|PIP_.*|PYTHON.*|VIRTUAL_ENV|LD_.*|DYLD_.*|SSL_.*|.*_PROXY)$/i;
/** Headers the transport sets itself. */
const TRANSPORT_HEADERS =
  /^(?:host|content-length|content-type|accept|connection|transfer-encoding|mcp-session-id|mcp-protocol-version|last-event-id|cookie)$/i;
/** Loopback hosts, the only ones a plain-http remote may name. */
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * The first way `entry` can run here: its packages in order, then its remotes; or, when none can, why
 * (the first package's or remote's reason). Never throws.
 */
export function launchPlan(entry: RegistryEntry, tools: LaunchTools): LaunchPlan | Unrunnable {
  const refusals: Unrunnable[] = [];
  for (const pkg of entry.server.packages ?? []) {
    const plan = packagePlan(pkg, tools);
    if ("inputs" in plan) return plan;
    refusals.push(plan);
  }
  for (const remote of entry.server.remotes ?? []) {
    const plan = remotePlan(remote, entry.server.version);
    if ("inputs" in plan) return plan;
    refusals.push(plan);
  }
  return refusals[0] ?? { why: "the entry has no package and no remote to run" };
}

/** The command line as a person reads it, with the arguments the user fills in shown as `<name>`. */
export function commandLine(plan: LaunchPlan, values: Record<string, string> = {}): string {
  if (plan.type === "remote") return plan.url ?? "";
  const args = plan.inputs.filter((i) => i.kind === "arg").flatMap((i) => {
    const v = i.fixed ?? values[i.name] ?? i.default;
    if (v === undefined) return i.required ? [argText(i, `<${i.name}>`)] : [];
    // A secret argument the user typed in is shown by name only, wherever the line is shown.
    return [argText(i, i.secret && i.fixed === undefined ? `<${i.name}>` : v)];
  });
  return [...plan.command ?? [], ...args].map(quoteForDisplay).join(" ");
}

/** The argv that runs `plan` with `values` for the inputs the user gave (checked before they get here). */
export function argv(plan: LaunchPlan, values: Record<string, string>): string[] {
  const args = plan.inputs.filter((i) => i.kind === "arg").flatMap((i) => {
    const v = i.fixed ?? values[i.name] ?? i.default;
    return v === undefined || v === "" ? [] : [argText(i, v)];
  });
  return [...plan.command ?? [], ...args];
}

/**
 * Why a value for `input` cannot be used, or undefined when it can: no control characters, within the
 * value cap, an argument never starting with `-`, a file path absolute, a choice among the choices.
 */
export function valueProblem(input: LaunchInput, value: string): string | undefined {
  // deno-lint-ignore no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) return "it contains control characters";
  if (value.length > 4096) return "it is over 4096 characters";
  if (input.kind === "arg" && value.startsWith("-")) return 'an argument value may not start with "-"';
  if (input.format === "filepath" && value && !value.startsWith("/")) return "it must be an absolute path";
  if (input.choices?.length && value && !input.choices.includes(value)) {
    return `it must be one of ${input.choices.map((c) => `"${c}"`).join(", ")}`;
  }
  return undefined;
}

function packagePlan(pkg: EntryPackage, tools: LaunchTools): LaunchPlan | Unrunnable {
  const type = pkg.registryType.toLowerCase();
  const id = pkg.identifier;
  if (type === "oci") {
    return {
      why: "it is an oci image, and codemode does not run upstream servers in containers (npm, PyPI and " +
        "remote servers only)",
      type: "oci",
      target: clean(id, 300),
      shown: { image: clean(id, 300) },
    };
  }
  if (type !== "npm" && type !== "pypi") {
    return {
      why: `its package type "${clean(type, 32)}" is not supported (npm, PyPI and remote servers only)`,
    };
  }
  const label = `${type === "npm" ? "npm" : "PyPI"} package "${clean(id, 300)}"`;
  const badName = type === "npm" ? !(NPM_NAME.test(id) && id.length <= 214) : !PYPI_NAME.test(id);
  if (badName) return { type, why: `the ${label} is not a valid package name`, target: clean(id, 300) };
  if (!pkg.version) {
    return {
      type,
      target: id,
      why: `the ${label} has no version, and codemode runs only exact, pinned versions`,
    };
  }
  if (!(type === "npm" ? SEMVER : PEP440).test(pkg.version)) {
    return {
      type,
      target: id,
      why: `the ${label} has version "${clean(pkg.version, 64)}", which is not one exact version`,
    };
  }
  const transport = pkg.transport?.type ?? "stdio";
  if (transport !== "stdio") {
    return {
      type,
      target: id,
      why: `the ${label} serves over "${clean(transport, 32)}", and codemode starts packages over stdio only`,
    };
  }
  if (type === "pypi" && !tools.uvx) {
    return { type, target: id, why: `the ${label} runs with uvx, which is not installed here` };
  }
  const inputs: LaunchInput[] = [];
  for (const variable of pkg.environmentVariables ?? []) {
    const input = envInput(variable, "env");
    if (typeof input === "string") return { type, target: id, why: input };
    inputs.push(input);
  }
  for (const arg of pkg.packageArguments ?? []) {
    const input = argInput(arg);
    if (typeof input === "string") return { type, target: id, why: input };
    inputs.push(input);
  }
  const command = type === "npm"
    ? ["npx", "-y", `${id}@${pkg.version}`]
    : ["uvx", "--from", `${id}==${pkg.version}`, id];
  const notes = pkg.runtimeArguments?.length
    ? [`The entry's runtime arguments (${pkg.runtimeArguments.length}) are not passed.`]
    : [];
  return { type, command, target: id, version: pkg.version, inputs, notes };
}

function remotePlan(remote: EntryTransport, version: string): LaunchPlan | Unrunnable {
  const shownUrl = clean(remote.url ?? "", 300);
  if (remote.type !== "streamable-http") {
    return {
      type: "remote",
      why: `its remote uses "${clean(remote.type, 32)}", and codemode adds Streamable HTTP remotes only`,
      shown: { url: shownUrl },
    };
  }
  let url: URL;
  try {
    url = new URL(remote.url ?? "");
  } catch {
    return { type: "remote", why: `its remote URL "${shownUrl}" is not a URL`, shown: { url: shownUrl } };
  }
  const host = url.host;
  const refuse = (why: string): Unrunnable => ({
    type: "remote",
    target: host,
    why,
    shown: { url: shownUrl },
  });
  if (
    /[{}]/.test(decodeURIComponent(remote.url ?? "")) ||
    remote.variables && Object.keys(remote.variables).length
  ) {
    return refuse("its remote URL has template variables, which codemode does not fill in");
  }
  if (url.username || url.password) return refuse("its remote URL carries credentials");
  if (url.protocol !== "https:" && !(url.protocol === "http:" && LOOPBACK.has(url.hostname))) {
    return refuse(`its remote URL is not https (plain http is allowed for loopback only)`);
  }
  const inputs: LaunchInput[] = [];
  for (const header of remote.headers ?? []) {
    const input = envInput(header, "header");
    if (typeof input === "string") return refuse(input);
    inputs.push(input);
  }
  // A remote's version is the entry's own free text: made safe to show in the question.
  return { type: "remote", url: url.href, target: host, version: clean(version, 64), inputs, notes: [] };
}

function envInput(item: EntryKeyValue, kind: "env" | "header"): LaunchInput | string {
  const name = item.name;
  const shown = clean(name, 64);
  if (kind === "env" && !ENV_NAME.test(name)) {
    return `its environment variable "${shown}" has an invalid name`;
  }
  if (kind === "env" && LAUNCHER_ENV.test(name)) {
    return `it sets the environment variable "${shown}", which would change how its launcher runs`;
  }
  if (kind === "header" && (!HEADER_NAME.test(name) || TRANSPORT_HEADERS.test(name))) {
    return `its header "${shown}" is not one codemode sends`;
  }
  const input = withText({
    name,
    kind,
    required: item.isRequired === true,
    secret: item.isSecret === true,
    ...fixedOrDefault(item),
  }, item);
  for (const v of [input.fixed, input.default]) {
    const problem = v === undefined ? undefined : valueProblem({ ...input, choices: undefined }, v);
    if (problem) {
      return `its ${kind === "env" ? "variable" : "header"} "${shown}" has an unusable value: ${problem}`;
    }
  }
  return input;
}

function argInput(arg: EntryArgument): LaunchInput | string {
  const named = arg.type === "named";
  const name = named ? arg.name ?? "" : arg.valueHint ?? "argument";
  if (named && !FLAG.test(name)) return `its argument "${clean(name, 64)}" is not a plain --flag`;
  if (!named && !/^[A-Za-z0-9_.-]{1,128}$/.test(name)) return "an argument has an unusable value hint";
  const input: LaunchInput = withText({
    name,
    kind: "arg",
    position: named ? "named" : "positional",
    required: arg.isRequired === true,
    secret: arg.isSecret === true,
    ...fixedOrDefault(arg),
  }, arg);
  for (const v of [input.fixed, input.default]) {
    const problem = v === undefined ? undefined : valueProblem({ ...input, choices: undefined }, v);
    if (problem) return `its argument "${clean(name, 64)}" has a value codemode does not pass: ${problem}`;
  }
  if (arg.variables && Object.keys(arg.variables).length) {
    return `its argument "${clean(name, 64)}" has template variables, which codemode does not fill in`;
  }
  return input;
}

function fixedOrDefault(item: { value?: string; default?: string }): Pick<LaunchInput, "fixed" | "default"> {
  return {
    ...(item.value !== undefined ? { fixed: item.value } : {}),
    ...(item.value === undefined && item.default !== undefined ? { default: item.default } : {}),
  };
}

function withText(input: LaunchInput, from: { description?: string; choices?: string[]; format?: string }) {
  if (from.description) input.description = clean(from.description, 300);
  if (from.choices?.length) input.choices = from.choices;
  if (from.format) input.format = from.format;
  return input;
}

function argText(input: LaunchInput, value: string): string {
  return input.position === "named" ? `${input.name}=${value}` : value;
}

/** An argv element as a shell would need it quoted, for display only (nothing is run through a shell). */
function quoteForDisplay(arg: string): string {
  return /^[A-Za-z0-9@%+=:,./_-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}
