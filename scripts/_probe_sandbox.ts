/**
 * The podman sandbox the in-process probes drive (hot_path_probe.ts, hop_stages_probe.ts): the real
 * session manager answering sandbox code with the host API the probe hands it, and no serve in front.
 * @module
 */
import process from "node:process";
import type { RpcHandler } from "../core/host_api/rpc.ts";
import { SessionManager } from "../core/sandbox/session_manager.ts";
import { podman } from "../plugins/runtime/podman.ts";
import { bootstrapCommand, bootstrapFrame } from "../sandbox/source.ts";

/** One probe session whose tool calls go to `rpc`, seeing `servers`; `run` fails on anything but "ok". */
export function probeSandbox(rpc: RpcHandler, servers: { name: string; alias: string }[] = []) {
  const runtime = podman();
  const sessions = new SessionManager({
    runtime: () => Promise.resolve(runtime),
    image: process.env.CODEMODE_IMAGE ?? "codemode-sandbox:latest",
    limits: { memory: "512m", pids: 64 },
    command: bootstrapCommand(),
    bootstrap: () => bootstrapFrame({ max_output: 1 << 20, servers }),
    rpc,
    maxOutput: 1 << 20,
    idleTimeout: 600,
  });
  const run = async (code: string): Promise<string> => {
    const result = await sessions.run("probe", code, { timeout: 600 });
    if (result.status !== "ok") throw new Error(`probe run failed: ${result.error}`);
    return result.stdout;
  };
  return { run, close: () => sessions.closeAll() };
}

/** PIN_SANDBOX=<cpu>: Python that moves the sandbox to that core, put before a probe's code (else ""). */
export function pinSandbox(): string {
  const cpu = process.env.PIN_SANDBOX;
  return cpu ? `import os; os.sched_setaffinity(0, {${Number(cpu)}})\n` : "";
}
