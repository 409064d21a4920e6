/**
 * Helpers for the npm package suite: packing the tarball as `npm pack` does for a release, a machine
 * with nothing but Node.js, npm, sh and coreutils on PATH (npm runs install scripts with sh), a throwaway
 * HOME and global prefix, and an MCP SDK client on a `serve` started by any command line. npm's cache is
 * the machine's own (`npm config get cache`), so an install needs the registry at most for what the
 * cache lacks; the registry settings a user would have (CA file, proxies) are passed on.
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { makeCoreutilsDir } from "./_coreutils.ts";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

const scratch: string[] = [];
globalThis.addEventListener("unload", () => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A temp directory removed when the test worker ends. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

/** What a command did. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command to completion (asynchronously: the test worker's event loop keeps going). */
export function runCommand(
  argv: string[],
  options: { env: Record<string, string>; cwd: string; input?: string; timeoutMs?: number },
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0], argv.slice(1), { cwd: options.cwd, env: options.env });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 300_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - started });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");
  });
}

/**
 * The package tarball: CODEMODE_E2E_TARBALL if set, else `npm pack` of this checkout (its prepack script
 * bundles the CLI and makes the snapshot) into a temp directory. Returns its path and how long packing took.
 */
export async function packTarball(): Promise<{ path: string; ms: number }> {
  if (process.env.CODEMODE_E2E_TARBALL) return { path: process.env.CODEMODE_E2E_TARBALL, ms: 0 };
  const out = tempDir("codemode-npm-pack-");
  const env = { ...stringEnv(), PATH: `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH ?? ""}` };
  const ran = await runCommand(["npm", "pack", "--pack-destination", out, "--loglevel=warn"], {
    env,
    cwd: ROOT,
    timeoutMs: 900_000,
  });
  const name = readdirSync(out).find((file) => file.endsWith(".tgz"));
  if (ran.code !== 0 || !name) throw new Error(`npm pack failed (${ran.code}):\n${ran.stderr}`);
  return { path: join(out, name), ms: ran.ms };
}

function stringEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
  );
}

/** The npm cache this machine uses (the suite installs from it). */
export const NPM_CACHE = spawnSync("npm", ["config", "get", "cache"], { encoding: "utf8" }).stdout.trim() ||
  join(homedir(), ".npm");

let nodeOnly: string | undefined;

/** A directory with Node.js, npm, npx, sh and coreutils, and nothing else: PATH on a bare machine with Node. */
export function nodeOnlyPath(): string {
  if (nodeOnly) return nodeOnly;
  const dir = makeCoreutilsDir("codemode-node-only-");
  scratch.push(dir);
  for (const name of ["node", "npm", "npx", "sh"]) {
    const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).stdout.trim();
    if (!found) throw new Error(`${name} is not installed`);
    symlinkSync(found, join(dir, name));
  }
  return nodeOnly = dir;
}

/** A fresh user: HOME, working directory and global prefix, PATH reduced to {@link nodeOnlyPath}. */
export interface NpmUser {
  home: string;
  cwd: string;
  prefix: string;
  env: Record<string, string>;
}

/** A new user on a machine with only Node.js and npm; `extraPath` dirs (such as one holding podman) are appended. */
export function npmUser(extraPath: string[] = []): NpmUser {
  const base = tempDir("codemode-npm-user-");
  const home = join(base, "home");
  const cwd = join(base, "work");
  const prefix = join(base, "prefix");
  for (const dir of [home, cwd, prefix]) mkdirSync(dir);
  const env: Record<string, string> = {
    PATH: [join(prefix, "bin"), nodeOnlyPath(), ...extraPath].join(":"),
    HOME: home,
    LANG: "C.UTF-8",
    npm_config_cache: NPM_CACHE,
    npm_config_update_notifier: "false",
  };
  // What reaching the registry takes on this machine (a CA bundle, proxies, the user's npmrc).
  const userconfig = join(homedir(), ".npmrc");
  if (existsSync(userconfig)) env.npm_config_userconfig = userconfig;
  for (
    const key of ["NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY"]
  ) {
    if (process.env[key]) env[key] = process.env[key]!;
  }
  return { home, cwd, prefix, env };
}

/** A directory holding only a `podman` link: added to PATH, it gives the user podman and nothing more. */
export function podmanOnlyPath(): string {
  const dir = tempDir("codemode-podman-only-");
  symlinkSync(
    spawnSync("sh", ["-c", "command -v podman"], { encoding: "utf8" }).stdout.trim(),
    join(dir, "podman"),
  );
  return dir;
}

/** Every file under `dir` with its size and modification time, for telling whether anything wrote there. */
export function listing(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      const s = statSync(full, { throwIfNoEntry: false });
      out.set(full, s ? `${entry.isDirectory() ? "dir" : s.size} ${s.mtimeMs}` : "gone");
      if (entry.isDirectory()) walk(full);
    }
  };
  walk(dir);
  return out;
}

/** The differences between two listings ("+ path", "- path", "~ path"). */
export function changes(before: Map<string, string>, after: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [path, what] of after) {
    if (!before.has(path)) out.push(`+ ${path}`);
    else if (before.get(path) !== what) out.push(`~ ${path}`);
  }
  for (const path of before.keys()) if (!after.has(path)) out.push(`- ${path}`);
  return out;
}

/** An SDK client on a stdio `serve` started by `command`; resolves once initialized. */
export async function connectServe(
  command: string[],
  user: NpmUser,
  env: Record<string, string> = {},
): Promise<{ client: Client; stderr: () => string; pid: number; ms: number }> {
  const started = performance.now();
  const transport = new StdioClientTransport({
    command: command[0],
    args: command.slice(1),
    env: { ...user.env, ...env },
    cwd: user.cwd,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Uint8Array) => (stderr += new TextDecoder().decode(chunk)));
  const client = new Client({ name: "e2e-npm", version: "1.0.0" });
  // npx installs the package before the server starts: the first initialize may wait for that.
  await client.connect(transport, { timeout: 300_000 });
  return { client, stderr: () => stderr, pid: transport.pid!, ms: performance.now() - started };
}

/** The text of a run_python result, and whether it was an error. */
export async function runPython(client: Client, code: string): Promise<{ text: string; isError: boolean }> {
  const result = await client.callTool({ name: "run_python", arguments: { code } }, { timeout: 300_000 });
  const content = (result.content ?? []) as { type: string; text?: string }[];
  return {
    text: content.filter((c) => c.type === "text").map((c) => c.text).join("\n"),
    isError: Boolean(result.isError),
  };
}

/** The pids of `pid`'s children (Linux). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Waits until `check` holds or `ms` pass; returns whether it held. */
export async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return check();
}
