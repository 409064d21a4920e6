/**
 * The host <-> sandbox protocol: newline-delimited JSON frames on the sandbox process's stdin/stdout.
 *
 * Host -> sandbox
 *   {type:"bootstrap", modules:{<dotted module name>: <python source>}, packages:[<package names>],
 *                      main:<module>, config:{max_output, servers:[{name, alias}]}}  (first line only)
 *   {type:"execute", id, code, timeout}      run code; timeout in seconds
 *   {type:"rpc_result", id, ok, value?, error?: {type, message}}
 *   {type:"interrupt", id}                 stop execution `id` as its timeout would (the client cancelled)
 *   {type:"file", id, path, offset, data, end, read_only?, dir?}   put a file (or folder) into the sandbox,
 *                                            in base64 pieces
 *   {type:"pause", id}                     stop execution `id`'s clock: the run waits for a person
 *   {type:"resume", id}                    restart it with the time that was left
 *   {type:"cancel_job", id, reason}        cancel background job `id` (CODEMODE_MAX_JOB_TIME ran out)
 *   {type:"shutdown"}
 *
 * Sandbox -> host
 *   {type:"ready", python}                   after bootstrap; python = version string
 *   {type:"rpc", id, method, params, job?}   a call into the host (tool calls, docs, search); `job` names
 *                                            the background job that made it (else it is the run's)
 *   {type:"output", id, stream:"stdout"|"stderr", data}   user output as produced
 *   {type:"done", id, status:"ok"|"error"|"timeout", value?, error?, dropped?:{stdout, stderr}, notes?,
 *                                            check?:[{line, col, kind, message, fix}]}   check: what the
 *                                            pre-run check found, so nothing ran (or the syntax error)
 *   {type:"display", id, mime, size, text?, data?, more?, dropped?}   one display of the run (an image as
 *                                            base64, or text); `more`: the next display frame continues its
 *                                            data; `dropped`: left out in the sandbox, over the cap (no data)
 *   {type:"artifact", id, path, offset, data, size?, end?}   a piece (base64) of a file from /workspace/artifacts,
 *                                            sent after the run's code and before its done frame
 *   {type:"artifact_skipped", id, path, reason, size?}   a file left out, so the result can name it
 *   {type:"file_done", id, ok, error?}       a file frame's file is in place (or why not)
 *   {type:"job", id, name, kind, state, seconds?, tool_calls?, error?, dropped?}   a background job started
 *                                            (state "running") or ended ("done", "failed", "cancelled")
 *   {type:"job_output", id, stream, data}    what a background job printed (batched, capped per job)
 *
 * Background jobs (core/host_api/jobs.ts) run between runs: the sandbox's event loop keeps running, so
 * frames about jobs, and calls from them, arrive while no run is active.
 *
 * The sandbox is untrusted: every frame it sends is parsed here, and anything that does not fit is
 * counted and dropped, never obeyed.
 *
 * Waiting for a person does not count against a run's timeout. When a call of the run needs the user's
 * approval, the host stops its own deadline and sends `pause` before the question goes out; when the last
 * open question of the run is answered it restarts the deadline and sends `resume`. The sandbox's
 * watchdog stops and restarts its clock on these frames (the Pyodide host's timer does too). Pausing is
 * the host's decision alone: no frame the sandbox sends can stop the host's deadline, so sandbox code
 * that stops its own watchdog is still killed at the host's.
 * @module
 */
import * as z from "zod";

/** Default cap on one frame, in bytes. Larger lines are discarded whole. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

const id = z.union([z.string(), z.number()]);
/** A job id as the sandbox names them ("job-3"). */
const jobId = z.string().max(64);

/** Why the sandbox left a file in /workspace/artifacts out (it says so, so the result can name it). */
export const ARTIFACT_SKIP_REASONS = [
  "too_large",
  "hidden",
  "symlink",
  "not_regular",
  "unreadable",
  "too_many",
  "bad_name",
] as const;

/** Frames the sandbox may send. */
export const SandboxFrame = z.discriminatedUnion("type", [
  z.object({ type: z.literal("ready"), python: z.string().optional() }),
  z.object({
    type: z.literal("rpc"),
    id,
    method: z.string().max(64),
    params: z.record(z.string(), z.unknown()).default({}),
    job: jobId.optional(),
  }),
  z.object({
    type: z.literal("output"),
    id: id.optional(),
    stream: z.enum(["stdout", "stderr"]),
    data: z.string(),
  }),
  z.object({
    type: z.literal("done"),
    id,
    status: z.enum(["ok", "error", "timeout"]),
    value: z.string().optional(),
    error: z.string().optional(),
    dropped: z.object({ stdout: z.number(), stderr: z.number() }).partial().optional(),
    notes: z.array(z.string().max(2000)).max(10).optional(),
    /** The pre-run check's findings (sanitised and capped on the host, see run_result.ts). */
    check: z.array(z.unknown()).max(10_000).optional(),
  }),
  z.object({
    type: z.literal("display"),
    id: id.optional(),
    mime: z.string().max(64),
    size: z.number().int().nonnegative(),
    text: z.string().max(4096).optional(),
    data: z.string().optional(),
    more: z.boolean().optional(),
    dropped: z.boolean().optional(),
  }),
  z.object({
    type: z.literal("artifact"),
    id,
    path: z.string().max(4096),
    offset: z.number().int().nonnegative(),
    data: z.string(),
    size: z.number().int().nonnegative().optional(),
    end: z.boolean().optional(),
  }),
  z.object({
    type: z.literal("artifact_skipped"),
    id,
    path: z.string().max(4096),
    reason: z.enum(ARTIFACT_SKIP_REASONS),
    size: z.number().int().nonnegative().optional(),
  }),
  z.object({
    type: z.literal("file_done"),
    id: z.string().max(100),
    ok: z.boolean(),
    error: z.string().max(4000).optional(),
  }),
  z.object({
    type: z.literal("job"),
    id: jobId,
    name: z.string().max(200).optional(),
    kind: z.enum(["job", "task"]).optional(),
    state: z.enum(["running", "done", "failed", "cancelled"]),
    seconds: z.number().nonnegative().optional(),
    tool_calls: z.number().int().nonnegative().optional(),
    error: z.string().max(8000).optional(),
    dropped: z.number().int().nonnegative().optional(),
  }),
  z.object({
    type: z.literal("job_output"),
    id: jobId,
    stream: z.enum(["stdout", "stderr"]),
    data: z.string(),
  }),
]);

/** A validated frame from the sandbox. */
export type SandboxFrame = z.infer<typeof SandboxFrame>;

/** Frames the host sends. */
export type HostFrame =
  | {
    type: "bootstrap";
    modules: Record<string, string>;
    packages: string[];
    main: string;
    config: BootstrapConfig;
  }
  | { type: "execute"; id: string; code: string; timeout: number }
  | { type: "rpc_result"; id: string | number; ok: true; value: unknown }
  | { type: "rpc_result"; id: string | number; ok: false; error: { type: string; message: string } }
  | { type: "interrupt"; id: string }
  | {
    type: "file";
    id: string;
    path: string;
    offset: number;
    data: string;
    end: boolean;
    read_only?: boolean;
    /** Make a folder at `path` instead (after the files in it, so read_only can seal it). */
    dir?: boolean;
  }
  | { type: "pause"; id: string }
  | { type: "resume"; id: string }
  | { type: "cancel_job"; id: string; reason: string }
  | { type: "shutdown" };

/** What the sandbox runtime is told at start-up. */
export interface BootstrapConfig {
  /** Per-stream output cap in bytes for one execution. */
  max_output: number;
  /** Cap on the bytes of all displays of one execution (images, tables); beyond it they are dropped. */
  max_display?: number;
  /** Most background jobs one session may have running (CODEMODE_MAX_JOBS). */
  max_jobs?: number;
  /**
   * Every configured, allowed server, so proxies exist before first use, and the servers the session
   * added from a registry (`added` says from which entry).
   */
  servers: { name: string; alias: string; description?: string; added?: { name: string; version: string } }[];
  /** The file descriptor of a direct duplex channel to use for frames instead of stdin/stdout. */
  channel_fd?: number;
  /** The MCP registry, when find_servers can search one: whether servers can be added (capability text). */
  registry?: { add: "off" | "ask" | "allow" };
  /** "off" skips the pre-run check of every program (CODEMODE_PRECHECK). */
  precheck?: "on" | "off";
  /** Where runs leave artifacts and what the sandbox sends of them (the host enforces its caps again). */
  artifacts?: { dir: string; max_file: number; max_files: number };
}
