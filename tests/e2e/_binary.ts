/**
 * Helpers for the compiled-binary suite: where dist/codemode is, a clean environment (temp HOME, temp
 * state dir, podman, the default image), running the binary, and finding containers it left behind.
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { makeCoreutilsDir } from "./_coreutils.ts";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Temp directories the suite made; removed when the test worker ends. */
const scratch: string[] = [];
globalThis.addEventListener("unload", () => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** The compiled binary scripts/compile.sh writes. */
export const BUILT = process.env.CODEMODE_E2E_BINARY ?? join(ROOT, "dist", "codemode");
/** Whether the binary exists; every test is skipped (loudly) when it does not. */
export const HAVE_BINARY = existsSync(BUILT);
/**
 * The binary under test: a copy outside the checkout, so nothing (node_modules, sandbox sources,
 * Deno) can be found next to it or above it.
 */
export const BINARY = HAVE_BINARY ? copyAway(BUILT) : BUILT;

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

function copyAway(path: string): string {
  const copy = join(tempDir("codemode-bin-"), "codemode");
  copyFileSync(path, copy);
  chmodSync(copy, 0o755);
  return copy;
}

/** The sandbox image the suite runs with. */
export const IMAGE = "codemode-sandbox:latest";
/** server-everything's entry point, for the proxied-call tests. */
export const EVERYTHING = join(
  ROOT,
  "node_modules",
  "@modelcontextprotocol",
  "server-everything",
  "dist",
  "index.js",
);

if (!HAVE_BINARY) {
  const bar = "!".repeat(78);
  console.error(
    `\n${bar}\n!! e2e: ${BUILT} does not exist: SKIPPING the compiled binary suite.\n` +
      `!! Build it first: bash scripts/compile.sh (deno task compile)\n${bar}\n`,
  );
}

/** Whether podman has the sandbox image (the sandbox tests need it). */
export function imagePresent(): boolean {
  return spawnSync("podman", ["image", "exists", IMAGE]).status === 0;
}

/** A temp HOME, cwd and state dir; `servers` are written to ~/MCPs/e2e.json. */
export interface Sandbox {
  home: string;
  cwd: string;
  env: Record<string, string>;
}

/** A fresh environment with no MCP configs (or only the given servers) and podman as the runtime. */
export function environment(
  servers: Record<string, unknown> = {},
  extra: Record<string, string> = {},
): Sandbox {
  const base = tempDir("codemode-e2e-");
  const home = join(base, "home");
  const cwd = join(base, "work");
  mkdirSync(home, { recursive: true });
  mkdirSync(cwd, { recursive: true });
  if (Object.keys(servers).length) {
    mkdirSync(join(home, "MCPs"));
    writeFileSync(join(home, "MCPs", "e2e.json"), JSON.stringify({ mcpServers: servers }, null, 2));
  }
  // Built from scratch: nothing from the developer's environment (configs, CODEMODE_*) leaks in.
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    LANG: "C.UTF-8",
    CODEMODE_STATE_DIR: join(base, "state"),
    CODEMODE_RUNTIME: "podman",
    CODEMODE_IMAGE: IMAGE,
    ...extra,
  };
  return { home, cwd, env };
}

/** server-everything as an MCP config entry. */
export function everythingServer(): Record<string, unknown> {
  return { everything: { command: "node", args: [EVERYTHING, "stdio"] } };
}

/** What one run of the binary did. */
export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  pid: number;
  /** Milliseconds after start at which each stdout chunk arrived. */
  stdoutTimes: { at: number; text: string }[];
}

/** Runs the binary to completion with `input` on stdin. */
export function runBinary(
  args: string[],
  sandbox: Sandbox,
  options: { input?: string; timeoutMs?: number; onSpawn?: (pid: number, ran: Ran) => void } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(BINARY, args, {
      cwd: sandbox.cwd,
      env: sandbox.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    const ran: Ran = {
      code: null,
      signal: null,
      stdout: "",
      stderr: "",
      ms: 0,
      pid: child.pid ?? -1,
      stdoutTimes: [],
    };
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      ran.stdout += text;
      ran.stdoutTimes.push({ at: performance.now() - started, text });
    });
    child.stderr.setEncoding("utf8").on("data", (text: string) => (ran.stderr += text));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      Object.assign(ran, { code, signal, ms: performance.now() - started });
      resolve(ran);
    });
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");
    options.onSpawn?.(child.pid ?? -1, ran);
  });
}

/** Names of containers a codemode process with this pid left behind. */
export function leftovers(pid: number): string[] {
  const out = spawnSync("podman", [
    "ps",
    "-a",
    "--filter",
    `label=codemode.owner-pid=${pid}`,
    "--format",
    "{{.Names}}",
  ], {
    encoding: "utf8",
  });
  return out.stdout.split("\n").filter(Boolean);
}

/** Waits until `check` holds or `ms` pass; returns whether it held. */
export async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}

/** The median of some numbers. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export { FORBIDDEN } from "./_coreutils.ts";

let coreutils: string | undefined;

/**
 * A directory holding only coreutils, made once per test worker and removed when it ends: the PATH of a
 * machine with no Deno, Node, Bun or container engine.
 */
export function coreutilsPath(): string {
  if (coreutils) return coreutils;
  coreutils = makeCoreutilsDir();
  scratch.push(coreutils);
  return coreutils;
}

/** The node executable's absolute path (upstream servers are started by it, never found on PATH). */
export const NODE = realpathSync(
  spawnSync("sh", ["-c", "command -v node"], { encoding: "utf8" }).stdout.trim() || "/usr/bin/node",
);

/**
 * A fresh HOME (state under ~/.local/state/codemode), PATH reduced to coreutils, runtime left to `auto`:
 * what a user who downloaded the binary onto a bare machine has. `servers` go to ~/MCPs/e2e.json.
 */
export function standalone(
  servers: Record<string, unknown> = {},
  extra: Record<string, string> = {},
): Sandbox {
  const sandbox = environment(servers, extra);
  for (const key of ["CODEMODE_STATE_DIR", "CODEMODE_RUNTIME", "CODEMODE_IMAGE"]) delete sandbox.env[key];
  sandbox.env.PATH = coreutilsPath();
  Object.assign(sandbox.env, extra);
  return sandbox;
}

/** The default state directory of a standalone sandbox. */
export function stateDirOf(sandbox: Sandbox): string {
  return sandbox.env.CODEMODE_STATE_DIR ?? join(sandbox.home, ".local", "state", "codemode");
}

/** server-everything as an MCP config entry started by node's absolute path. */
export function everythingByPath(): Record<string, unknown> {
  return { everything: { command: NODE, args: [EVERYTHING, "stdio"] } };
}
