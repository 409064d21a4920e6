/**
 * Puts host files into a sandbox over its channel (`codemode run --file`, mounts under Pyodide): `file`
 * frames of base64 pieces under the frame cap, then a wait for the sandbox's `file_done` answer. No host
 * folder is mounted for this.
 * @module
 */
import { Buffer } from "node:buffer";
import type { HostFrame, SandboxFrame } from "./protocol.ts";

/** A file to put into the sandbox. */
export interface SandboxFile {
  /** Absolute path in the sandbox. */
  path: string;
  data: Uint8Array;
  /** Make it read-only in the sandbox. */
  readOnly?: boolean;
  /** A folder (no data): made, and sealed when read-only; sent after the files in it. */
  directory?: boolean;
}

/** Raw bytes per file frame (about 5.6 MB as base64, well under the 16 MiB frame cap). */
export const FILE_CHUNK_BYTES = 4 * 1024 * 1024;

/** Sends files and settles each when the sandbox answers. */
export class FileSender {
  #send: (frame: HostFrame) => Promise<void>;
  #waiting = new Map<string, (error?: string) => void>();
  #count = 0;

  /** A sender that writes frames with `send`. */
  constructor(send: (frame: HostFrame) => Promise<void>) {
    this.#send = send;
  }

  /** Sends one file; resolves once it is in place, rejects with the sandbox's reason or after `timeoutMs`. */
  async put(file: SandboxFile, timeoutMs = 60_000): Promise<void> {
    const id = `file-${++this.#count}`;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answered = new Promise<void>((resolve, reject) => {
      this.#waiting.set(id, (error) => (error === undefined ? resolve() : reject(new Error(error))));
      timer = setTimeout(
        () => this.#settle(id, `the sandbox did not confirm "${file.path}" within ${timeoutMs / 1000}s`),
        timeoutMs,
      );
    });
    answered.catch(() => {});
    try {
      const { data } = file;
      if (file.directory) {
        const ro = file.readOnly ? { read_only: true } : {};
        await this.#send({
          type: "file",
          id,
          path: file.path,
          offset: 0,
          data: "",
          end: true,
          dir: true,
          ...ro,
        });
        return await answered;
      }
      for (let offset = 0; offset < data.length || offset === 0; offset += FILE_CHUNK_BYTES) {
        const piece = data.subarray(offset, offset + FILE_CHUNK_BYTES);
        const end = offset + FILE_CHUNK_BYTES >= data.length;
        await this.#send({
          type: "file",
          id,
          path: file.path,
          offset,
          data: Buffer.from(piece.buffer, piece.byteOffset, piece.length).toString("base64"),
          end,
          ...(end && file.readOnly ? { read_only: true } : {}),
        });
        if (end) break;
      }
      await answered;
    } finally {
      clearTimeout(timer);
      this.#waiting.delete(id);
    }
  }

  /** Takes the sandbox's answer for one file. */
  done(frame: Extract<SandboxFrame, { type: "file_done" }>): void {
    this.#settle(frame.id, frame.ok ? undefined : frame.error ?? "the sandbox could not write it");
  }

  /** Fails every file still waiting (the sandbox is gone). */
  failAll(reason: string): void {
    for (const id of [...this.#waiting.keys()]) this.#settle(id, reason);
  }

  #settle(id: string, error?: string): void {
    const waiter = this.#waiting.get(id);
    this.#waiting.delete(id);
    waiter?.(error);
  }
}
