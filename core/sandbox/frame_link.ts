/**
 * The two ways frames travel between the host and a sandbox: the sandbox process's stdio (web streams,
 * as every runtime provides them) or a direct channel (the socket podman passes as fd 3). The socket is
 * read and written with its own events instead of through web-stream adapters, which cost about as much
 * CPU per proxied call as the rest of the host's frame handling (measured in BENCHMARKS.md, "hot path").
 * Both split lines with the same size cap (frame_reader.ts), and both let a frame's handler hold reading
 * until it is done with the frame (artifact pieces are written to disk in order: the channel is the
 * backpressure).
 * @module
 */
import type { Duplex } from "node:stream";
import { FrameSplitter, type OversizeHandler, readFrames } from "./frame_reader.ts";

/** What handles one frame: a promise holds reading until it settles. */
export type LineHandler = (line: string) => Promise<void> | void;

/** Frames in both directions on one sandbox. */
export interface FrameLink {
  /** Writes one frame: `line` is its JSON, without the newline. Rejects when the link is broken. */
  write(line: string): Promise<void>;
  /** Reads frames until the link ends, handing each line to `onLine` in order. */
  read(onLine: LineHandler, maxBytes: number, onOversize: OversizeHandler): Promise<void>;
}

const encoder = new TextEncoder();

/** Frames over a sandbox process's stdin and stdout. */
export function streamLink(
  readable: ReadableStream<Uint8Array>,
  writable: WritableStream<Uint8Array>,
): FrameLink {
  const writer = writable.getWriter();
  writer.closed.catch(() => {});
  return {
    write: (line) => writer.write(encoder.encode(line + "\n")),
    async read(onLine, maxBytes, onOversize) {
      for await (const line of readFrames(readable, maxBytes, onOversize)) {
        const pending = onLine(line);
        if (pending) await pending;
      }
    },
  };
}

/** Frames over a duplex socket, with its 'data' events and writes. */
export function socketLink(socket: Duplex): FrameLink {
  return {
    write(line) {
      if (socket.destroyed || !socket.writable) {
        return Promise.reject(new Error("The sandbox channel is closed"));
      }
      if (socket.write(line + "\n")) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const settle = (error?: Error) => {
          socket.off("drain", done).off("close", closed);
          if (error) reject(error);
          else resolve();
        };
        const done = () => settle();
        const closed = () => settle(new Error("The sandbox channel closed"));
        socket.once("drain", done).once("close", closed);
      });
    },
    read(onLine, maxBytes, onOversize) {
      const splitter = new FrameSplitter(maxBytes, onOversize);
      /** Handles `lines` from `from` on; true when a handler holds reading (the socket is paused). */
      const handle = (lines: string[], from: number): boolean => {
        for (let i = from; i < lines.length; i++) {
          const pending = onLine(lines[i]);
          if (!pending) continue;
          socket.pause();
          pending.catch(() => {}).then(() => {
            if (!handle(lines, i + 1)) socket.resume();
          });
          return true;
        }
        return false;
      };
      return new Promise<void>((resolve) => {
        socket.on("data", (chunk: Uint8Array) => void handle(splitter.push(chunk), 0));
        socket.once("close", () => {
          const tail = splitter.end();
          if (tail !== undefined) void onLine(tail);
          resolve();
        });
      });
    },
  };
}
