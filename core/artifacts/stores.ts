/**
 * The artifact stores of one codemode process: one per session (a stdio `serve`, each HTTP MCP session, a
 * `codemode run`), under `<state dir>/artifacts/<host>-<pid>/<session id>/`. A session's store is deleted
 * when the session ends and the process's folder when the process stops; folders of processes that died
 * without cleaning up are removed at the next start, as leftover containers are reaped.
 * @module
 */
import { mkdir, readdir, rm } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { processAlive } from "../process_alive.ts";
import { type ArtifactLimits, ArtifactStore } from "./store.ts";

/** A process folder's name: this host (made file-name safe) and the owner's pid. */
export function processFolderName(host: string, pid: number): string {
  return `${host.replace(/[^A-Za-z0-9.-]/g, "_")}-${pid}`;
}

/** The folder of the artifacts of session `session` of codemode process `pid` on this host. */
export function sessionArtifactsDir(stateDir: string, pid: number, session: string): string {
  return join(stateDir, "artifacts", processFolderName(hostname(), pid), session);
}

/** Every artifact store of this process. */
export class ArtifactStores {
  /** `<state dir>/artifacts`: one folder per codemode process. */
  readonly root: string;
  /** This process's folder. */
  readonly dir: string;
  readonly limits: ArtifactLimits;
  #stores = new Map<string, ArtifactStore>();

  /** Stores under `stateDir`; nothing is written until a file arrives. */
  constructor(stateDir: string, limits: ArtifactLimits) {
    this.root = join(stateDir, "artifacts");
    this.dir = join(this.root, processFolderName(hostname(), process.pid));
    this.limits = limits;
  }

  /** A new, empty store with a fresh unguessable id. */
  open(): ArtifactStore {
    const id = randomBytes(16).toString("hex");
    const store = new ArtifactStore(id, join(this.dir, id), this.limits);
    this.#stores.set(id, store);
    void mkdir(this.root, { recursive: true, mode: 0o700 }).catch(() => {});
    return store;
  }

  /** The store with `id`, if this process has it. */
  get(id: string): ArtifactStore | undefined {
    return this.#stores.get(id);
  }

  /** Deletes one store and its files. */
  async close(id: string): Promise<void> {
    const store = this.#stores.get(id);
    this.#stores.delete(id);
    await store?.close();
  }

  /** Deletes every store of this process and its folder. */
  async closeAll(): Promise<void> {
    const stores = [...this.#stores.values()];
    this.#stores.clear();
    await Promise.allSettled(stores.map((s) => s.close()));
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Removes the folders of codemode processes on this host that no longer run; returns how many. */
  async reapLeftovers(): Promise<number> {
    const host = processFolderName(hostname(), 0).slice(0, -2);
    let entries: string[];
    try {
      entries = await readdir(this.root);
    } catch {
      return 0;
    }
    let reaped = 0;
    for (const name of entries) {
      const match = /^(.*)-(\d+)$/.exec(name);
      if (!match || match[1] !== host) continue;
      const pid = Number(match[2]);
      if (pid === process.pid || processAlive(pid)) continue;
      await rm(join(this.root, name), { recursive: true, force: true });
      reaped++;
    }
    return reaped;
  }
}
