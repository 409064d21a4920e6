/**
 * The files the dashboard hands out for a serve it shows: the images its runs displayed (kept beside its
 * activity, core/observe/display_files.ts) and the artifacts of its live sessions (kept by core/artifacts
 * under the state dir). A name must pass strict rules before any path is built from it (an image's is one
 * the publisher could have given; an artifact's passes the artifact store's own path rules, in a session
 * the serve says is alive). Only this user's private regular files are read, and never through a link.
 * Images go out as PNG or JPEG and nothing else; artifacts as attachments, with any type a browser could
 * run replaced by application/octet-stream. Nothing is sniffed, framed, or allowed to run.
 * @module
 */
import { constants, type Stats } from "node:fs";
import { type FileHandle, lstat, open, realpath } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { basename, join } from "node:path";
import mime from "mime-types";
import { ARTIFACT_URI_PREFIX, parseArtifactTail, quotePath } from "../artifacts/paths.ts";
import { artifactFile } from "../artifacts/store.ts";
import { sessionArtifactsDir } from "../artifacts/stores.ts";
import { sendFileBody } from "../serve/node_http_bridge.ts";
import { activityFiles } from "../observe/activity_file.ts";
import { hasSignature, imageTypeOfFile } from "../observe/display_files.ts";
import { NotPrivateError, privateProblem, readPrivateFile } from "../observe/private_files.ts";
import { log } from "../observe/log.ts";
import { attachment } from "../serve/artifact_http.ts";
import type { ServeView } from "./live_serves.ts";
import { FILE_CSP, json, SECURITY_HEADERS } from "./responses.ts";

/** The artifact sessions' ids: 128 random bits in hex (core/artifacts/stores.ts). */
const SESSION_ID = /^[0-9a-f]{32}$/;
/** Largest image file read (the publisher keeps far less in all). */
const MAX_IMAGE_BYTES = 64 * 1024 * 1024;
/** Types a browser could render as a document or run: an artifact never goes out as one of these. */
const ACTIVE_TYPE = /html|xml|svg|javascript|ecmascript|wasm|pdf/i;

/** Answers `GET /api/serves/<pid>/displays/<name>`: one image a run of `view` displayed. */
export async function sendDisplay(
  req: IncomingMessage,
  res: ServerResponse,
  stateDir: string,
  view: ServeView,
  name: string,
): Promise<void> {
  const type = imageTypeOfFile(name);
  if (!type) {
    return json(res, 404, { error: `No image named ${quotePath(name)}: image names look like 12-0.png` });
  }
  const dir = activityFiles(stateDir, view.pid).displays;
  const gone = () =>
    json(res, 404, {
      error: `The image ${quotePath(name)} is no longer kept: the dashboard keeps the images of a serve's ` +
        "most recent runs only",
    });
  let bytes: Uint8Array;
  try {
    const problem = privateProblem(await lstat(dir), "folder");
    if (problem) throw new NotPrivateError(dir, problem);
    bytes = await readPrivateFile(join(dir, name), 0, MAX_IMAGE_BYTES);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return gone();
    return refused(res, error);
  }
  if (!hasSignature(bytes, type)) {
    log.warn("the dashboard refused an image file that is not what its name says", { file: name });
    return json(res, 404, { error: `The image ${quotePath(name)} is not a valid ${type.extension} file` });
  }
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": type.mimeType,
    "content-length": String(bytes.length),
    "content-disposition": `inline; filename="${name}"`,
    "content-security-policy": FILE_CSP,
    "cache-control": "no-store",
  });
  res.end(req.method === "HEAD" ? undefined : bytes);
}

/**
 * Answers `GET /api/serves/<pid>/artifacts/<session>/<path>`: one artifact of a live session of `view`,
 * downloaded as an attachment; 410 once its session ended (its files are deleted then).
 */
export async function sendArtifact(
  req: IncomingMessage,
  res: ServerResponse,
  stateDir: string,
  view: ServeView,
  tail: string,
): Promise<void> {
  const named = parseArtifactTail(tail);
  if (!named || !SESSION_ID.test(named.session)) {
    return json(res, 404, {
      error: "Not an artifact: the link names no session, or its path is not one an artifact can have " +
        "(no .., no absolute path, no hidden file)",
    });
  }
  const { session, path } = named;
  if (!view.state.artifactSessions?.includes(session)) {
    const published = publishedBy(view, session);
    return json(res, published ? 410 : 404, {
      error: published
        ? `The artifact ${quotePath(path)} is gone: its session ended, and a session's artifacts are ` +
          "deleted with it"
        : `Serve ${view.pid} has no artifact session "${session}"`,
    });
  }
  const file = artifactFile(sessionArtifactsDir(stateDir, view.pid, session), path);
  let opened: { handle: FileHandle; stat: Stats };
  try {
    // The whole way down must be real folders: a link anywhere would make realpath differ.
    const expected = artifactFile(sessionArtifactsDir(await realpath(stateDir), view.pid, session), path);
    opened = await openPrivate(file, expected);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return json(res, 404, { error: `No artifact ${quotePath(path)} in that session (any more)` });
    }
    return refused(res, error);
  }
  const { handle, stat } = opened;
  try {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": downloadType(path),
      "content-length": String(stat.size),
      "content-disposition": attachment(basename(path)),
      "content-security-policy": FILE_CSP,
      "cache-control": "no-store",
    });
    if (req.method === "HEAD") return void res.end();
    await sendFileBody(res, handle.createReadStream({ autoClose: false, end: Math.max(0, stat.size - 1) }));
  } finally {
    await handle.close().catch(() => {});
  }
}

/** Opens `file` for reading if its real path is `expected` and it is this user's private regular file. */
async function openPrivate(file: string, expected: string): Promise<{ handle: FileHandle; stat: Stats }> {
  if (await realpath(file) !== expected) throw new NotPrivateError(file, "its path goes through a link");
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const stat = await handle.stat();
    const problem = privateProblem(stat, "file");
    if (problem) throw new NotPrivateError(file, problem);
    return { handle, stat };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** The Content-Type an artifact is downloaded with: by its name, never one a browser could run. */
export function downloadType(path: string): string {
  const type = mime.lookup(path);
  return typeof type !== "string" || ACTIVE_TYPE.test(type) ? "application/octet-stream" : type;
}

/** Whether a run of `view` listed an artifact of `session`. */
function publishedBy(view: ServeView, session: string): boolean {
  const prefix = `${ARTIFACT_URI_PREFIX}${session}/`;
  return view.events.some((e) => e.kind === "run.end" && e.artifacts?.some((a) => a.uri.startsWith(prefix)));
}

function refused(res: ServerResponse, error: unknown): void {
  const reason = error instanceof NotPrivateError ? error.message : String(error);
  log.warn("the dashboard refused to hand out a file", { reason });
  json(res, 403, { error: "Refused: the file is not this user's private file (see the dashboard's log)" });
}
