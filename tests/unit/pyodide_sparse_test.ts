/**
 * The sparse snapshot layout (plugins/runtime/_pyodide_sparse.ts) without Pyodide: what is encoded comes
 * back page for page, zero pages are left out, pages written before the restore are found and cleared,
 * and a truncated or foreign snapshot is refused.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sparseSnapshotCodec } from "../../plugins/runtime/_pyodide_sparse.ts";

const PAGE = 4096;
const codec = sparseSnapshotCodec();

/** A Pyodide-shaped image: a 48-byte header whose second u32 is its length, then `pages` pages of heap. */
function image(pages: number, filled: number[]): { snapshot: Uint8Array; heap: Uint8Array } {
  const snapshot = new Uint8Array(48 + pages * PAGE);
  new Uint32Array(snapshot.buffer, 0, 12).set([0x706f7970, 48, 7, 0]);
  const heap = snapshot.subarray(48);
  for (const page of filled) heap.fill(page + 1, page * PAGE, page * PAGE + 100);
  heap[heap.length - 1] = 9; // one byte on the last page keeps that page
  return { snapshot, heap };
}

Deno.test("a snapshot comes back page for page, and its zero pages are not stored", () => {
  const { snapshot, heap } = image(64, [0, 1, 2, 10, 40]);
  const encoded = codec.encode(snapshot);
  assert.ok(encoded.length < 8 * PAGE, `${encoded.length} bytes for 6 of 64 pages`);
  const opened = codec.open(codec.memoryReader(encoded));
  assert.equal(opened.headerLength, 48);
  assert.equal(opened.heapLength, heap.length);
  assert.equal(opened.image.length, snapshot.length, "Pyodide sizes its memory from the image");
  assert.deepEqual(opened.image.subarray(0, 48), snapshot.subarray(0, 48));
  const restored = new Uint8Array(heap.length);
  assert.deepEqual(opened.fill(restored), new Uint32Array());
  assert.deepEqual(restored, heap);
});

Deno.test("pages written before the restore that are zero in the image are found, recorded and cleared", () => {
  const { snapshot, heap } = image(16, [3]);
  const dirty = () => {
    const fresh = new Uint8Array(heap.length);
    fresh.fill(0xee, 5 * PAGE, 7 * PAGE); // what a module's own start-up wrote
    fresh.fill(0xee, 3 * PAGE, 3 * PAGE + 10); // under a data page: overwritten anyway
    return fresh;
  };
  const checking = codec.open(codec.memoryReader(codec.encode(snapshot)));
  const first = dirty();
  const clears = checking.fill(first, true);
  assert.deepEqual([...clears], [5 * PAGE, 2 * PAGE]);
  assert.deepEqual(first, heap);
  const again = codec.open(codec.memoryReader(codec.encode(snapshot, clears)));
  const second = dirty();
  again.fill(second);
  assert.deepEqual(second, heap, "the recorded clears are applied on every restore");
});

Deno.test("a snapshot is read from its file, and a truncated or foreign one is refused", () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-sparse-"));
  try {
    const { snapshot, heap } = image(8, [1, 6]);
    const encoded = codec.encode(snapshot);
    const path = join(dir, "snapshot.bin");
    writeFileSync(path, encoded);
    const restored = new Uint8Array(heap.length);
    codec.open(codec.fileReader(path)).fill(restored);
    assert.deepEqual(restored, heap);

    writeFileSync(path, encoded.subarray(0, encoded.length - 10));
    const cut = codec.open(codec.fileReader(path));
    assert.throws(() => cut.fill(new Uint8Array(heap.length)), /snapshot is truncated/);
    assert.throws(() => codec.open(codec.memoryReader(encoded.subarray(0, 12))), /snapshot is truncated/);
    assert.throws(() => codec.open(codec.memoryReader(snapshot)), /not a codemode snapshot/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
