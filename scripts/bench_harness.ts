/**
 * Shared pieces of `deno task bench`: result rows, percentiles, a fake HOME with MCP servers configured, a
 * real `codemode serve` under the SDK client, and podman helpers. Benchmarks measure; they never assert.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { execFile } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { encode } from "gpt-tokenizer/encoding/o200k_base";

/** Repository root. */
export const ROOT = resolve(new URL("..", import.meta.url).pathname);
/** The deno from node_modules, which runs codemode from source. */
export const DENO = join(ROOT, "node_modules/.bin/deno");
/** The compiled binary, when `deno task compile` has made it. */
export const BINARY = join(ROOT, "dist/codemode");
/** The sandbox image every container figure uses. */
export const IMAGE = "codemode-sandbox:latest";

/** One measured figure, with the baseline it is compared with in the same run. */
export interface Row {
  section: string;
  metric: string;
  value: number;
  unit: string;
  baseline?: { label: string; value: number };
  /** value / baseline (or baseline / value for speed-ups); computed by {@link row}. */
  ratio?: number;
  /** The target as text, e.g. "< 10 ms" or "ratio ≤ 1.5"; computed by {@link row}. */
  target?: string;
  /** Whether the figure meets its target (a report, never an assertion). */
  met?: boolean;
  note?: string;
}

/** A target: the value or the ratio compared with a limit. */
export interface Target {
  on: "value" | "ratio";
  op: "<" | "≤" | "≥" | "=";
  limit: number;
}

function meets(x: number, { op, limit }: Target): boolean {
  return op === "<" ? x < limit : op === "≤" ? x <= limit : op === "≥" ? x >= limit : x === limit;
}

/** Builds a row; the ratio is value/baseline unless `speedup` asks for baseline/value. */
export function row(
  fields: Omit<Row, "ratio" | "target" | "met"> & { speedup?: boolean; goal?: Target },
): Row {
  const { speedup, goal, ...rest } = fields;
  const b = rest.baseline?.value;
  const ratio = b === undefined || b === 0 || rest.value === 0
    ? undefined
    : Number((speedup ? b / rest.value : rest.value / b).toPrecision(3));
  return {
    ...rest,
    value: round(rest.value),
    ...(rest.baseline ? { baseline: { ...rest.baseline, value: round(rest.baseline.value) } } : {}),
    ...(ratio !== undefined ? { ratio } : {}),
    ...(goal ? targetFields(goal, goal.on === "ratio" ? ratio : rest.value, rest.unit) : {}),
  };
}

function targetFields(goal: Target, x: number | undefined, unit: string): Pick<Row, "target" | "met"> {
  const text = goal.on === "ratio"
    ? `${goal.op === "≥" ? "speed-up" : "ratio"} ${goal.op} ${goal.limit}x`
    : `${goal.op} ${goal.limit} ${unit}`;
  return { target: text, ...(x === undefined ? {} : { met: meets(x, goal) }) };
}

/** A section of the benchmark: its rows, or why it was skipped. */
export interface SectionResult {
  name: string;
  rows: Row[];
  skipped?: string;
  /** What the section ran, for the report (e.g. which tool the parallel figure used). */
  notes: string[];
}

/** The p-th quantile (0..1) of `values` (nearest rank). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
}

/** Rounds to three decimals. */
export function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Times `fn` `n` times after `warmup` untimed calls; returns milliseconds per call. */
export async function timeEach(n: number, warmup: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await fn();
    times.push(performance.now() - start);
  }
  return times;
}

/** o200k tokens of a value's JSON. */
export function tokens(value: unknown): number {
  return encode(JSON.stringify(value)).length;
}

/** Launch specs of the npm reference servers, keyed by server name. */
export function referenceServers(home: string): Record<string, unknown> {
  const pkg = (name: string) => join(ROOT, "node_modules/@modelcontextprotocol", name, "dist/index.js");
  return {
    everything: { command: "node", args: [pkg("server-everything"), "stdio"] },
    memory: {
      command: "node",
      args: [pkg("server-memory")],
      env: { MEMORY_FILE_PATH: join(home, "memory.jsonl") },
    },
    filesystem: { command: "node", args: [pkg("server-filesystem"), home] },
  };
}

/** A throwaway HOME whose `~/MCPs/servers.json` holds `servers(home)`. */
export function fakeHome(servers: (home: string) => Record<string, unknown> = referenceServers): string {
  const home = mkdtempSync(join(tmpdir(), "codemode-bench-home-"));
  mkdirSync(join(home, "MCPs"));
  writeFileSync(join(home, "MCPs", "servers.json"), JSON.stringify({ mcpServers: servers(home) }));
  return home;
}

/** Removes a fake HOME. */
export function removeHome(home: string): void {
  rmSync(home, { recursive: true, force: true });
}

/** Options of {@link startServe}. */
export interface ServeOptions {
  home: string;
  /** The command that serves; default: codemode from source through node_modules' deno. */
  command?: string[];
  env?: Record<string, string>;
  /** Largest message the client reads (the SDK's stdio default is 10 MiB). */
  maxBufferSize?: number;
  /** The client to connect (not yet connected), e.g. one that answers elicitation; a plain one by default. */
  client?: Client;
}

/** A `codemode serve` under the SDK client. */
export interface Served {
  client: Client;
  pid: number;
  /** Milliseconds from spawning the process to the initialize response. */
  initializeMs: number;
  /** Resolves when the serve logged its runtime choice (or rejects after `ms`). */
  runtimeSelected(ms?: number): Promise<void>;
  /** Calls run_python (with `timeout` seconds when given); throws with the text when the run is an error. */
  run(code: string, timeout?: number): Promise<{ text: string; structured: Record<string, unknown> }>;
  close(): Promise<void>;
}

/** The command that runs codemode from source. */
export function sourceCommand(): string[] {
  return [DENO, "run", "-A", "--quiet", join(ROOT, "cli.ts")];
}

/** Starts `codemode serve` in `home` at log level info, so the runtime choice can be seen on stderr. */
export async function startServe(options: ServeOptions): Promise<Served> {
  const [command, ...args] = options.command ?? sourceCommand();
  const transport = new StdioClientTransport({
    command,
    args: [...args, "serve"],
    cwd: options.home,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: options.home,
      CODEMODE_STATE_DIR: join(options.home, "state"),
      CODEMODE_LOG_LEVEL: "info",
      ...options.env,
    },
    stderr: "pipe",
    ...(options.maxBufferSize ? { maxBufferSize: options.maxBufferSize } : {}),
  });
  let stderr = "";
  const selected = new Set<() => void>();
  transport.stderr?.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-20_000);
    if (stderr.includes('"selected runtime"')) { for (const resolve of selected) resolve(); }
  });
  const client = options.client ?? new Client({ name: "codemode-bench", version: "1" });
  const start = performance.now();
  await client.connect(transport);
  const initializeMs = performance.now() - start;
  if (transport.pid) ownPids.add(transport.pid);
  return {
    client,
    pid: transport.pid ?? 0,
    initializeMs,
    runtimeSelected(ms = 30_000) {
      if (stderr.includes('"selected runtime"')) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`codemode serve chose no runtime within ${ms} ms: ${stderr.slice(-500)}`)),
          ms,
        );
        selected.add(() => (clearTimeout(timer), resolve()));
      });
    },
    async run(code, timeout) {
      const r = await client.callTool(
        { name: "run_python", arguments: { code, ...(timeout ? { timeout } : {}) } },
        { timeout: 120_000 + (timeout ?? 0) * 1000 },
      );
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      if (r.isError) throw new Error(`run_python failed: ${text.slice(0, 500)}`);
      return { text, structured: (r.structuredContent ?? {}) as Record<string, unknown> };
    },
    close: () => client.close(),
  };
}

/** Waits until `<home>/state/tool-docs/` caches `count` servers, so background indexing is not timed. */
export async function catalogIndexed(home: string, count: number, ms = 30_000): Promise<boolean> {
  const dir = join(home, "state", "tool-docs");
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (existsSync(dir) && readdirSync(dir).filter((f) => f.endsWith(".json")).length >= count) return true;
    await sleep(100);
  }
  return false;
}

/** Resident memory of a process in MiB (VmRSS), or undefined when it is gone. */
export function rssMiB(pid: number): number | undefined {
  try {
    const match = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m);
    return match ? round(Number(match[1]) / 1024, 1) : undefined;
  } catch {
    return undefined;
  }
}

/** Sleeps `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** What a command printed and how it exited. */
export interface Exec {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (no shell). */
export function exec(command: string, args: string[], timeoutMs = 60_000): Promise<Exec> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** Whether a command runs and exits 0. */
export async function works(command: string, args: string[]): Promise<boolean> {
  return (await exec(command, args, 30_000)).code === 0;
}

/** Process ids of every serve this benchmark started: only their containers are its to clean up. */
const ownPids = new Set<number>();

/** Counts a serve started outside {@link startServe} as this benchmark's (for {@link removeLeftovers}). */
export function trackServe(pid: number): void {
  ownPids.add(pid);
}

/** Managed containers (running or not) whose owner is a serve this benchmark started. */
export async function ownContainers(): Promise<string[]> {
  const r = await exec("podman", [
    "ps",
    "-a",
    "--filter",
    "label=codemode.managed=true",
    "--format",
    '{{.Names}} {{index .Labels "codemode.owner-pid"}}',
  ]);
  return r.stdout.split("\n").map((line) => line.trim().split(" ")).filter(([name, pid]) =>
    name && ownPids.has(Number(pid))
  ).map(([name]) => name);
}

/** The sandbox container of the serve with process id `pid`, waiting up to `ms` for it to appear. */
export async function sandboxOf(pid: number, ms = 10_000): Promise<string | undefined> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const r = await exec("podman", [
      "ps",
      "--filter",
      `label=codemode.owner-pid=${pid}`,
      "--format",
      "{{.Names}}",
    ]);
    const name = r.stdout.split("\n").map((s) => s.trim()).find(Boolean);
    if (name) return name;
    await sleep(100);
  }
  return undefined;
}

/**
 * Waits for the containers of this benchmark's serves to go (a closed serve removes its own), then removes
 * what is left; returns the names it had to remove. Other processes' containers are never touched.
 */
export async function removeLeftovers(ms = 10_000): Promise<string[]> {
  const deadline = Date.now() + ms;
  let left = await ownContainers();
  while (left.length && Date.now() < deadline) {
    await sleep(200);
    left = await ownContainers();
  }
  for (const name of left) await exec("podman", ["rm", "-f", "-t", "0", name]);
  return left;
}
