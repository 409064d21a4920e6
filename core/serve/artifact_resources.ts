/**
 * A session's artifacts as MCP resources: `resource_link` items in each run's result, `resources/list`
 * entries, and `resources/read` on `codemode://artifacts/<session>/<path>`, as text when the file is UTF-8
 * text and as a base64 blob otherwise. Each MCP server knows only its own session's store, so another
 * session's URI reads exactly like one that never existed.
 * @module
 */
import { Buffer } from "node:buffer";
import {
  type McpServer,
  type ReadResourceResult,
  ResourceNotFoundError,
  ResourceTemplate,
} from "@modelcontextprotocol/server";
import type { RunResult } from "../contracts/output.ts";
import type { ArtifactStore } from "../artifacts/store.ts";
import { ARTIFACT_URI_PREFIX, parseArtifactTail } from "../artifacts/paths.ts";

/** The URI template of artifacts. */
export const ARTIFACT_URI_TEMPLATE = `${ARTIFACT_URI_PREFIX}{session}/{+path}`;

/** A result's artifacts as `resource_link` content items. */
export function artifactLinks(result: RunResult) {
  return (result.artifacts ?? []).map((link) => ({ type: "resource_link" as const, ...link }));
}

/** Makes `store`'s artifacts listable and readable through `server`. */
export function registerArtifactResources(server: McpServer, store: ArtifactStore): void {
  const template = new ResourceTemplate(ARTIFACT_URI_TEMPLATE, {
    list: () => ({
      resources: store.list().map((info) => ({
        uri: store.uri(info.path),
        name: info.path,
        mimeType: info.mimeType,
        size: info.size,
      })),
    }),
  });
  server.registerResource(
    "artifacts",
    template,
    { title: "Artifacts", description: "Files this session's runs left in /workspace/artifacts" },
    async (uri, variables): Promise<ReadResourceResult> => {
      const named = parseArtifactTail(`${variables.session}/${variables.path}`);
      const info = named && named.session === store.id ? store.get(named.path) : undefined;
      const bytes = info ? await store.read(info.path) : undefined;
      if (!info || !bytes) throw new ResourceNotFoundError(uri.href);
      const text = textOf(info.mimeType, bytes);
      return {
        contents: [
          text === undefined
            ? { uri: uri.href, mimeType: info.mimeType, blob: Buffer.from(bytes).toString("base64") }
            : { uri: uri.href, mimeType: info.mimeType, text },
        ],
      };
    },
  );
}

/** The file as text when its type is textual and its bytes are UTF-8, else undefined (send a blob). */
function textOf(mimeType: string, bytes: Uint8Array): string | undefined {
  const textual = mimeType.startsWith("text/") || /[/+](json|xml|yaml|javascript|csv)$/.test(mimeType);
  if (!textual) return undefined;
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return text.includes("\0") ? undefined : text;
  } catch {
    return undefined;
  }
}
