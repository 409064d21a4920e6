/**
 * The Pyodide start-up snapshot: a memory image of a freshly loaded interpreter, with codemode's sandbox
 * runtime already imported when one is given, made by the host program in snapshot mode (the same
 * locked-down subprocess, running no user code) and checked to restore. Loading
 * Pyodide takes seconds; restoring the snapshot a fraction of one. A binary carries one made at build
 * time, a checkout one made after `npm install` (scripts/pyodide_snapshot.ts); without either it is made on
 * first use.
 * @module
 */
import { spawn } from "node:child_process";
import { Buffer } from "node:buffer";
import { denoArgs, denoEnv } from "./_pyodide_deno.ts";
import type { HostConfig } from "./pyodide_host.ts";

/** What making a snapshot needs. */
export interface SnapshotInput {
  deno: string;
  /** The host program, already written out. */
  program: string;
  /** The Pyodide distribution, with a trailing separator. */
  assets: string;
  /** Paths the subprocess may read (the distribution and the program's directory). */
  readable: string[];
  timeoutMs: number;
  /** The sandbox runtime to import before the image is taken. */
  preload?: Preload;
}

/** The sandbox runtime a snapshot imports: the bootstrap source and what its frame carries. */
export interface Preload {
  bootstrap: string;
  modules: Readonly<Record<string, string>>;
  packages: readonly string[];
}

/** What names a snapshot's preloaded runtime in its file name (see snapshotPath). */
export function preloadKey(preload: Preload | undefined): string {
  return preload ? `${preload.bootstrap}\n${preloadFrame(preload)}` : "";
}

/** The bootstrap frame that hands `preload`'s modules to the host program in snapshot mode. */
export function preloadFrame(preload: Preload): string {
  return JSON.stringify({ type: "bootstrap", modules: preload.modules, packages: preload.packages });
}

/** A snapshot, or why none was made. */
export type SnapshotOutcome = { ok: true; bytes: Uint8Array; ms: number } | { ok: false; reason: string };

/** Runs the host program in snapshot mode and returns the snapshot's bytes; never rejects. */
export async function makeSnapshot(input: SnapshotInput): Promise<SnapshotOutcome> {
  const started = performance.now();
  const config: HostConfig = {
    mode: "snapshot",
    assets: input.assets,
    memoryBytes: 2 ** 30,
    ...(input.preload ? { bootstrap: input.preload.bootstrap } : {}),
  };
  const argv = denoArgs({
    deno: input.deno,
    program: input.program,
    readable: input.readable,
    heapBytes: 2 ** 30,
    config,
  });
  const stdin = input.preload ? `${preloadFrame(input.preload)}\n` : undefined;
  const result = await capture(argv[0], argv.slice(1), input.timeoutMs, denoEnv(input.program), true, stdin);
  // Snapshots are a private Pyodide API: anything but a big, cleanly exiting answer is not one.
  if (result.code !== 0 || result.bytes.length < 1024 * 1024) {
    return { ok: false, reason: `exit code ${result.code}: ${result.stderr.slice(-2000)}` };
  }
  return { ok: true, bytes: result.bytes, ms: performance.now() - started };
}

/** What a command printed and how it exited. */
export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
  bytes: Uint8Array;
}

/** Runs a command to completion with a time limit, the given environment and stdin; never rejects. */
export function capture(
  command: string,
  args: string[],
  timeoutMs: number,
  env: Record<string, string>,
  binary = false,
  stdin?: string,
): Promise<Captured> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: "/", env, stdio: [stdin ? "pipe" : "ignore", "pipe", "pipe"] });
    if (stdin) {
      child.stdin!.on("error", () => {}); // a child that died early is reported by its exit code
      child.stdin!.end(stdin);
    }
    const out: Uint8Array[] = [];
    let stderr = "";
    child.stdout!.on("data", (chunk: Uint8Array) => out.push(chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr = (stderr + chunk).slice(-8192));
    const timer = setTimeout(() => {
      stderr += `\nTimed out after ${timeoutMs} ms`;
      child.kill("SIGKILL");
    }, timeoutMs);
    const finish = (code: number) => {
      clearTimeout(timer);
      const bytes = Buffer.concat(out);
      resolve({ code, stdout: binary ? "" : bytes.toString("utf8"), stderr, bytes });
    };
    child.on("error", (error) => {
      stderr += error.message;
      finish(-1);
    });
    child.on("close", (code) => finish(code ?? -1));
  });
}
