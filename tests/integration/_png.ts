/**
 * Test helper: decodes a PNG far enough to prove it is one: the signature, the CRCs of the critical chunks
 * (as libpng, which only warns about ancillary ones: server-everything's tiny image has a bad iCCP CRC),
 * the header, and the image data inflated to exactly the rows the header promises.
 * @module
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { crc32, inflateSync } from "node:zlib";

/** The PNG signature. */
export const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

/** Decodes `data` (base64 or bytes) and returns its size; fails the test unless it is a whole, valid PNG. */
export function decodePng(data: string | Uint8Array): { width: number; height: number } {
  const png = typeof data === "string" ? Buffer.from(data, "base64") : Buffer.from(data);
  assert.deepEqual([...png.subarray(0, 8)], PNG_SIGNATURE, "PNG signature");
  let at = 8;
  let header: { width: number; height: number; depth: number; color: number } | undefined;
  const idat: Buffer[] = [];
  while (at < png.length) {
    const length = png.readUInt32BE(at);
    const kind = png.subarray(at + 4, at + 8).toString("latin1");
    const body = png.subarray(at + 8, at + 8 + length);
    const crc = png.readUInt32BE(at + 8 + length);
    const critical = kind[0] === kind[0].toUpperCase();
    if (critical) assert.equal(crc, crc32(png.subarray(at + 4, at + 8 + length)), `${kind} CRC`);
    if (kind === "IHDR") {
      header = { width: body.readUInt32BE(0), height: body.readUInt32BE(4), depth: body[8], color: body[9] };
      assert.equal(body[12], 0, "not interlaced");
    }
    if (kind === "IDAT") idat.push(body);
    at += 12 + length;
    if (kind === "IEND") break;
  }
  assert.ok(header, "IHDR chunk");
  const rows = inflateSync(Buffer.concat(idat));
  const rowBytes = 1 + Math.ceil(header.width * CHANNELS[header.color] * header.depth / 8);
  assert.equal(rows.length, rowBytes * header.height, "the image data holds exactly the promised rows");
  return { width: header.width, height: header.height };
}
