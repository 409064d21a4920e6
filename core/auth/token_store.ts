/**
 * Where OAuth credentials live: one JSON file per server and server URL under `<stateDir>/oauth/` (a
 * 0700 folder), each 0600 and written whole to a temporary file that is renamed into place, so a reader
 * (another codemode process) never sees half of one. The file holds the tokens, the dynamically
 * registered client, and the discovery results that let a refresh skip rediscovery. Processes that share
 * the folder (CODEMODE_OAUTH_DIR) refresh one at a time, under a lock.
 * @module
 */
import { createHash } from "node:crypto";
import { chmod, mkdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type {
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client";
import { log } from "../observe/log.ts";
import { writePrivateFile } from "../observe/private_files.ts";

/** A lock untouched this long is taken to be a dead holder's; a live holder refreshes it every 5 s. */
const LOCK_STALE_MS = 10_000;

/** What is stored for one server. */
export interface StoredAuth {
  version: 1;
  /** The server's configured name. */
  server: string;
  /** The URL the credentials were obtained for. */
  serverUrl: string;
  /** The client codemode registered dynamically (absent for a configured `clientId`). */
  client?: StoredOAuthClientInformation;
  tokens?: StoredOAuthTokens;
  /** When the access token was obtained and when it expires, in ms since the epoch. */
  obtainedAt?: number;
  expiresAt?: number;
  /** Protected resource and authorization server metadata, as the SDK's `auth()` discovered them. */
  discovery?: OAuthDiscoveryState;
  /** The resource indicator (RFC 8707) the tokens were issued for. */
  resource?: string;
}

/** The OAuth credential files of one state directory. */
export class TokenStore {
  /** The folder the files live in. */
  readonly dir: string;

  /** The files under `dir` (CODEMODE_OAUTH_DIR), by default `<stateDir>/oauth`. */
  constructor(stateDir: string, dir: string = join(stateDir, "oauth")) {
    this.dir = dir;
  }

  /** The file of one server at one URL: a renamed server or a moved URL starts over. */
  pathFor(server: string, serverUrl: string): string {
    const safe = server.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64) || "server";
    const digest = createHash("sha256").update(`${server}\n${serverUrl}`).digest("hex").slice(0, 16);
    return join(this.dir, `${safe}-${digest}.json`);
  }

  /** The stored record, or undefined when there is none or it cannot be read (a warning is logged). */
  async read(server: string, serverUrl: string): Promise<StoredAuth | undefined> {
    const file = this.pathFor(server, serverUrl);
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
        log.warn("cannot read stored OAuth credentials", { server, file, error: (error as Error).message });
      }
      return undefined;
    }
    try {
      const record = JSON.parse(text) as StoredAuth;
      if (record?.version === 1 && record.server === server && record.serverUrl === serverUrl) return record;
    } catch {
      // Reported below; the content itself is never quoted, since it holds tokens.
    }
    log.warn("ignoring a damaged OAuth credentials file; log in again", { server, file });
    return undefined;
  }

  /** Writes the record atomically with mode 0600. */
  async write(record: StoredAuth): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700).catch(() => {});
    const file = this.pathFor(record.server, record.serverUrl);
    await writePrivateFile(file, JSON.stringify(record, null, 2) + "\n", { sync: true });
  }

  /** Deletes the record; true when there was one. */
  async remove(server: string, serverUrl: string): Promise<boolean> {
    const file = this.pathFor(server, serverUrl);
    const existed = await stat(file).then(() => true, () => false);
    await rm(file, { force: true });
    return existed;
  }

  /**
   * Runs `fn` holding the server's lock, which other codemode processes sharing the folder (a fleet's
   * nodes on one volume) honour too: two refreshes of one refresh token would spend it twice, and an
   * authorization server that rotates refresh tokens may then revoke them all. The lock is a directory
   * beside the file (atomic on network file systems too), refreshed while held and taken over once stale
   * (its holder died).
   */
  async locked<T>(server: string, serverUrl: string, fn: () => Promise<T>): Promise<T> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const { lock } = await import("proper-lockfile");
    const release = await lock(this.pathFor(server, serverUrl), {
      realpath: false,
      stale: LOCK_STALE_MS,
      retries: { retries: 100, minTimeout: 25, maxTimeout: 250 },
      // The default throws from a timer, which would end the process: another holder took it over.
      onCompromised: (error) =>
        log.warn("an OAuth lock was taken over while held", { server, error: error.message }),
    });
    try {
      return await fn();
    } finally {
      await release().catch((error) =>
        log.warn("could not release an OAuth lock", { server, error: (error as Error).message })
      );
    }
  }

  /** A fingerprint of the file that changes whenever it is rewritten ("" when there is none). */
  async stamp(server: string, serverUrl: string): Promise<string> {
    try {
      const info = await stat(this.pathFor(server, serverUrl));
      return `${info.mtimeMs}:${info.size}:${info.ino}`;
    } catch {
      return "";
    }
  }
}
