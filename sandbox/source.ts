/**
 * The sandbox's Python, embedded as text: the host starts `python3 -I -c <bootstrap>` and sends every
 * runtime module in the first stdin frame, so no host directory is mounted and any image with python3
 * works. Text imports keep the sources inside a compiled binary (Deno and Bun both support them).
 * @module
 */
import type { BootstrapConfig, HostFrame } from "../core/sandbox/protocol.ts";
import bootstrap from "./bootstrap.py" with { type: "text" };
import runtimeInit from "./codemode_runtime/__init__.py" with { type: "text" };
import artifacts from "./codemode_runtime/artifacts.py" with { type: "text" };
import asyncioRun from "./codemode_runtime/asyncio_run.py" with { type: "text" };
import capture from "./codemode_runtime/capture.py" with { type: "text" };
import channel from "./codemode_runtime/channel.py" with { type: "text" };
import context from "./codemode_runtime/context.py" with { type: "text" };
import display from "./codemode_runtime/display.py" with { type: "text" };
import embedded from "./codemode_runtime/embedded.py" with { type: "text" };
import executor from "./codemode_runtime/executor.py" with { type: "text" };
import figures from "./codemode_runtime/figures.py" with { type: "text" };
import files from "./codemode_runtime/files.py" with { type: "text" };
import frames from "./codemode_runtime/frames.py" with { type: "text" };
import job from "./codemode_runtime/job.py" with { type: "text" };
import jobs from "./codemode_runtime/jobs.py" with { type: "text" };
import kernel from "./codemode_runtime/kernel.py" with { type: "text" };
import mplBackend from "./codemode_runtime/mpl_backend.py" with { type: "text" };
import output from "./codemode_runtime/output.py" with { type: "text" };
import processMain from "./codemode_runtime/process.py" with { type: "text" };
import rpc from "./codemode_runtime/rpc.py" with { type: "text" };
import tracebacks from "./codemode_runtime/tracebacks.py" with { type: "text" };
import values from "./codemode_runtime/values.py" with { type: "text" };
import watchdog from "./codemode_runtime/watchdog.py" with { type: "text" };
import mcpInit from "./mcp/__init__.py" with { type: "text" };
import mcpAdded from "./mcp/_added.py" with { type: "text" };
import mcpCalls from "./mcp/_calls.py" with { type: "text" };
import mcpCertainty from "./mcp/_certainty.py" with { type: "text" };
import mcpDryRun from "./mcp/_dry_run.py" with { type: "text" };
import mcpLiterals from "./mcp/_literals.py" with { type: "text" };
import mcpPlan from "./mcp/_plan.py" with { type: "text" };
import mcpPrecheck from "./mcp/_precheck.py" with { type: "text" };
import mcpProxy from "./mcp/_proxy.py" with { type: "text" };
import mcpSkillCode from "./mcp/_skill_code.py" with { type: "text" };
import mcpSkills from "./mcp/_skills.py" with { type: "text" };
import mcpRuntime from "./mcp/runtime.py" with { type: "text" };
import mcpServers from "./mcp/servers/__init__.py" with { type: "text" };

/** Source of the bootstrap program, for `python3 -I -c` (or for a Pyodide host to run itself). */
export const BOOTSTRAP_SOURCE: string = bootstrap;

/** Every sandbox module by dotted name. */
export const MODULES: Readonly<Record<string, string>> = Object.freeze({
  "codemode_runtime": runtimeInit,
  "codemode_runtime.artifacts": artifacts,
  "codemode_runtime.asyncio_run": asyncioRun,
  "codemode_runtime.capture": capture,
  "codemode_runtime.channel": channel,
  "codemode_runtime.context": context,
  "codemode_runtime.display": display,
  "codemode_runtime.embedded": embedded,
  "codemode_runtime.executor": executor,
  "codemode_runtime.figures": figures,
  "codemode_runtime.files": files,
  "codemode_runtime.frames": frames,
  "codemode_runtime.job": job,
  "codemode_runtime.jobs": jobs,
  "codemode_runtime.kernel": kernel,
  "codemode_runtime.mpl_backend": mplBackend,
  "codemode_runtime.output": output,
  "codemode_runtime.process": processMain,
  "codemode_runtime.rpc": rpc,
  "codemode_runtime.tracebacks": tracebacks,
  "codemode_runtime.values": values,
  "codemode_runtime.watchdog": watchdog,
  "mcp": mcpInit,
  "mcp._added": mcpAdded,
  "mcp._calls": mcpCalls,
  "mcp._certainty": mcpCertainty,
  "mcp._dry_run": mcpDryRun,
  "mcp._literals": mcpLiterals,
  "mcp._plan": mcpPlan,
  "mcp._precheck": mcpPrecheck,
  "mcp._proxy": mcpProxy,
  "mcp._skill_code": mcpSkillCode,
  "mcp._skills": mcpSkills,
  "mcp.runtime": mcpRuntime,
  "mcp.servers": mcpServers,
});

/** The modules in MODULES that are packages. */
export const PACKAGES: readonly string[] = Object.freeze(["codemode_runtime", "mcp", "mcp.servers"]);

/** The module whose `main(config, rest)` runs the CPython sandbox process. An in-process host (Pyodide)
 * runs BOOTSTRAP_SOURCE's `install(MODULES, PACKAGES)` instead and drives
 * `codemode_runtime.embedded.EmbeddedSession` (see sandbox/README.md). */
export const MAIN_MODULE = "codemode_runtime.process";

/** The whole runtime as an in-process host installs it: what a Pyodide snapshot imports ahead of time. */
export const SANDBOX_RUNTIME = Object.freeze({
  bootstrap: BOOTSTRAP_SOURCE,
  modules: MODULES,
  packages: PACKAGES,
});

/** The command that starts the sandbox process; its first stdin line must be `bootstrapFrame()`. */
export function bootstrapCommand(python = "python3"): string[] {
  return [python, "-I", "-c", BOOTSTRAP_SOURCE];
}

/** The first frame the host writes: every module, and the config the runtime starts with. */
export function bootstrapFrame(config: BootstrapConfig): HostFrame {
  return { type: "bootstrap", modules: { ...MODULES }, packages: [...PACKAGES], main: MAIN_MODULE, config };
}
