/**
 * The rules every artifact path from the sandbox must pass before the host acts on it, and the
 * `codemode://artifacts/<session>/<path>` URIs artifacts are served under. The sandbox checks the same
 * rules, but it is untrusted: this is the authority.
 * @module
 */

/** Scheme and authority of artifact URIs. */
export const ARTIFACT_URI_PREFIX = "codemode://artifacts/";

/** Longest artifact path, in characters (Linux's PATH_MAX is 4096 bytes; the host adds its own prefix). */
export const MAX_PATH_CHARS = 1024;
/** Longest name of one path component, in bytes (NAME_MAX on Linux). */
const MAX_COMPONENT_BYTES = 255;

const encoder = new TextEncoder();

/**
 * Why `path` cannot be an artifact path, or undefined when it can. Paths are relative to the artifacts
 * folder, `/`-separated and already normal: no empty, `.` or `..` component, no absolute path, no hidden
 * (dot) component, no backslash, colon or control character, and short enough for any file system.
 */
export function artifactPathProblem(path: unknown): string | undefined {
  if (typeof path !== "string" || path === "") return "the path is empty";
  if (path.length > MAX_PATH_CHARS) return `the path is longer than ${MAX_PATH_CHARS} characters`;
  if (path.startsWith("/")) return "the path is absolute";
  // deno-lint-ignore no-control-regex
  if (/[\u0000-\u001f\u007f\\:]/.test(path)) return "the path has a control character, backslash or colon";
  if (path.isWellFormed && !path.isWellFormed()) return "the path is not valid Unicode";
  for (const part of path.split("/")) {
    if (part === "") return "the path has an empty component";
    if (part === "." || part === "..") return `the path has a "${part}" component`;
    if (part.startsWith(".")) return "the path names a hidden file or folder";
    if (encoder.encode(part).length > MAX_COMPONENT_BYTES) return "a component of the path is too long";
  }
  return undefined;
}

/** The URI of artifact `path` in session `session`; each component is percent-encoded. */
export function artifactUri(session: string, path: string): string {
  return ARTIFACT_URI_PREFIX + [session, ...path.split("/")].map(encodeURIComponent).join("/");
}

/** The session and path a `<session>/<encoded path>` tail names, or undefined when it names none. */
export function parseArtifactTail(tail: string): { session: string; path: string } | undefined {
  const [session, ...rest] = tail.split("/");
  if (!session || rest.length === 0) return undefined;
  try {
    const path = rest.map((part) => decodeURIComponent(part)).join("/");
    const id = decodeURIComponent(session);
    return artifactPathProblem(path) ? undefined : { session: id, path };
  } catch {
    return undefined; // malformed percent-encoding
  }
}

/** A path as text safe to put in a note: quoted, control characters escaped, clipped. */
export function quotePath(path: unknown): string {
  const text = typeof path === "string" ? path : String(path);
  const clipped = text.length > 120 ? `${text.slice(0, 117)}...` : text;
  return JSON.stringify(clipped);
}
