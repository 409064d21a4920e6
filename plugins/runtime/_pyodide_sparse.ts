/**
 * codemode's layout of a Pyodide memory snapshot. Pyodide's image (`makeMemorySnapshot()`) is its header
 * followed by the whole wasm heap, about half of it zero pages; restoring it reads the file into a buffer
 * and copies that into the heap, touching twice the image, and first touches of memory are what a start
 * costs most where page faults are dear (~4 ms per MiB on the VMs measured). This layout keeps only the
 * non-zero pages, and restoring reads them from the file straight into the heap.
 *
 * Layout, little-endian u32s: magic, Pyodide's header length H, heap length, data-run count D, clear-run
 * count C; D x (offset, length); C x (offset, length); Pyodide's header (H bytes); the data runs' bytes in
 * order. Clear runs are pages that Pyodide's own start-up writes before the restore but that are zero in
 * the image: they are recorded when the snapshot is checked (see `fill`) and zeroed on every restore.
 *
 * The host program carries this function as text (`Function.prototype.toString`, like pyodide_host.ts), so
 * it must not refer to anything outside itself.
 * @module
 */

/** Reads exactly `into.length` bytes (throws when the snapshot ends first); `close` frees a file. */
export type SnapshotRead = ((into: Uint8Array) => void) & { close?: () => void };

/** A snapshot whose head was read: what Pyodide needs up front, and how to put the heap in place. */
export interface OpenedSnapshot {
  /** Pyodide's header, then zeros up to the image's length (Pyodide sizes the memory from it). */
  image: Uint8Array;
  headerLength: number;
  heapLength: number;
  /**
   * Zeroes the clear runs of `heap` (with `recordClears`, first finds them: the non-zero pages outside
   * the data runs), reads the data runs into it and closes the reader; returns the clear runs used.
   */
  fill(heap: Uint8Array, recordClears?: boolean): Uint32Array;
}

/** The codec: encode Pyodide's image, open a codemode snapshot, and readers for a file or bytes. */
export function sparseSnapshotCodec() {
  const MAGIC = 0x434d5301, PAGE = 4096;

  const fileReader = (path: string): SnapshotRead => {
    const file = Deno.openSync(path);
    const read: SnapshotRead = (into) => {
      for (let at = 0; at < into.length;) {
        const n = file.readSync(into.subarray(at));
        if (!n) throw new Error("the snapshot is truncated");
        at += n;
      }
    };
    read.close = () => file.close();
    return read;
  };

  const memoryReader = (bytes: Uint8Array): SnapshotRead => {
    let at = 0;
    return (into) => {
      if (at + into.length > bytes.length) throw new Error("the snapshot is truncated");
      into.set(bytes.subarray(at, at + into.length));
      at += into.length;
    };
  };

  const u32s = (read: SnapshotRead, count: number) => {
    const values = new Uint32Array(count);
    read(new Uint8Array(values.buffer));
    return values;
  };

  const zeroPage = (heap: Uint8Array, at: number) => {
    const end = Math.min(at + PAGE, heap.length);
    for (let i = at; i < end; i++) if (heap[i] !== 0) return false;
    return true;
  };

  /** The non-zero pages of `heap` as flat (offset, length) pairs. */
  const dataRuns = (heap: Uint8Array) => {
    const runs: number[] = [];
    for (let at = 0; at < heap.length;) {
      if (zeroPage(heap, at)) {
        at += PAGE;
        continue;
      }
      let end = at;
      while (end < heap.length && !zeroPage(heap, end)) end += PAGE;
      runs.push(at, Math.min(end, heap.length) - at);
      at = end;
    }
    return runs;
  };

  /** The non-zero pages of `heap` outside the `data` runs. */
  const dirtyGaps = (heap: Uint8Array, data: Uint32Array) => {
    const dirty: number[] = [];
    const gap = (from: number, to: number) => {
      const runs = dataRuns(heap.subarray(from, to));
      for (let i = 0; i < runs.length; i += 2) dirty.push(from + runs[i], runs[i + 1]);
    };
    let from = 0;
    for (let i = 0; i < data.length; i += 2) {
      gap(from, data[i]);
      from = data[i] + data[i + 1];
    }
    gap(from, heap.length);
    return Uint32Array.from(dirty);
  };

  /** Pyodide's image (its header, then the heap) in codemode's layout, with `clears` recorded. */
  const encode = (snapshot: Uint8Array, clears: Uint32Array = new Uint32Array()): Uint8Array<ArrayBuffer> => {
    const headerLength = new Uint32Array(snapshot.buffer, snapshot.byteOffset, 4)[1];
    const heap = snapshot.subarray(headerLength);
    const data = dataRuns(heap);
    const head = Uint32Array.from([MAGIC, headerLength, heap.length, data.length / 2, clears.length / 2]);
    const parts = [head, Uint32Array.from(data), clears].map((u) => new Uint8Array(u.buffer));
    parts.push(snapshot.subarray(0, headerLength));
    for (let i = 0; i < data.length; i += 2) parts.push(heap.subarray(data[i], data[i] + data[i + 1]));
    const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
    let at = 0;
    for (const part of parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  };

  /** Reads a codemode snapshot's head from `read`; the heap follows in `fill`. */
  const open = (read: SnapshotRead): OpenedSnapshot => {
    const [magic, headerLength, heapLength, dataCount, clearCount] = u32s(read, 5);
    if (magic !== MAGIC) throw new Error("the snapshot is not a codemode snapshot");
    const data = u32s(read, dataCount * 2);
    const recorded = u32s(read, clearCount * 2);
    const image = new Uint8Array(headerLength + heapLength); // untouched past the header: never paid for
    read(image.subarray(0, headerLength));
    return {
      image,
      headerLength,
      heapLength,
      fill(heap, recordClears = false) {
        const clears = recordClears ? dirtyGaps(heap, data) : recorded;
        for (let i = 0; i < clears.length; i += 2) heap.fill(0, clears[i], clears[i] + clears[i + 1]);
        for (let i = 0; i < data.length; i += 2) read(heap.subarray(data[i], data[i] + data[i + 1]));
        read.close?.();
        return clears;
      },
    };
  };

  return { encode, open, fileReader, memoryReader };
}

/** What {@link sparseSnapshotCodec} returns. */
export type SparseSnapshotCodec = ReturnType<typeof sparseSnapshotCodec>;
