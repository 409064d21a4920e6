/**
 * `GET /artifacts/<session>/<path>` under `serve --http`: downloads one artifact. The request has passed
 * the same Host, Origin and token guard as `/mcp`; on top of that its `Mcp-Session-Id` must name a live
 * session whose artifacts the URL names, so one session can never fetch another's. Unknown sessions, other
 * sessions' artifacts and missing files all get the same 404. The file goes out as an attachment that a
 * browser will neither sniff nor run.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { basename } from "node:path";
import type { ArtifactStore } from "../artifacts/store.ts";
import { parseArtifactTail } from "../artifacts/paths.ts";
import { sendError, sendFileBody } from "./node_http_bridge.ts";
import { log } from "../observe/log.ts";

/** The path prefix artifacts are downloaded under. */
export const ARTIFACTS_PATH = "/artifacts/";

/** Finds the artifact store of a live MCP session by its `Mcp-Session-Id`. */
export type StoreLookup = (mcpSessionId: string) => ArtifactStore | undefined;

/** Answers one request under {@link ARTIFACTS_PATH} (already past the guard). */
export async function serveArtifact(
  req: IncomingMessage,
  res: ServerResponse,
  pathname: string,
  lookup: StoreLookup,
): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    return sendError(res, 405, `Method "${req.method}" not allowed: artifacts are downloaded with GET`, {
      allow: "GET, HEAD",
    });
  }
  const sessionId = req.headers["mcp-session-id"];
  if (typeof sessionId !== "string" || !sessionId) {
    return sendError(res, 400, "Send the Mcp-Session-Id header of the session whose run made the artifact");
  }
  const named = parseArtifactTail(pathname.slice(ARTIFACTS_PATH.length));
  const store = lookup(sessionId);
  const opened = named && store && named.session === store.id ? await store.open(named.path) : undefined;
  if (!opened) {
    log.info("artifact download refused", { reason: "not found in the requesting session" });
    return sendError(res, 404, "Artifact not found in this session");
  }
  const { info, handle } = opened;
  try {
    res.writeHead(200, {
      "content-type": info.mimeType,
      "content-length": String(info.size),
      "content-disposition": attachment(basename(info.path)),
      "x-content-type-options": "nosniff",
      "content-security-policy": "sandbox; default-src 'none'",
      "cache-control": "no-store",
    });
    if (req.method === "HEAD") return void res.end();
    await sendFileBody(res, handle.createReadStream({ autoClose: false }));
  } finally {
    await handle.close().catch(() => {});
  }
}

/** A Content-Disposition that names the file safely in any browser (ASCII fallback plus UTF-8 name). */
export function attachment(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}
