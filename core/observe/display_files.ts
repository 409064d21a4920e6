/**
 * The images of a serve's runs, kept beside its activity so the dashboard can show them without putting
 * megabytes of base64 into the event log: `<pid>.displays/<seq>-<index>.<png|jpg>` (the run end event's
 * number, the display's place in the run), 0600 files in a 0700 folder. Only PNG and JPEG images whose
 * bytes start with their format's signature are kept, only for the most recent runs, and within a total
 * cap: the oldest runs' images are removed first. A run end event names the files it got.
 * @module
 */
import type { DisplayEntry, RunEndEvent } from "./activity.ts";

/** An image type the publisher keeps and the dashboard serves: its file extension, MIME type and signature. */
export interface ImageFileType {
  extension: "png" | "jpg";
  mimeType: "image/png" | "image/jpeg";
  signature: readonly number[];
}

const TYPES: readonly ImageFileType[] = [
  { extension: "png", mimeType: "image/png", signature: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { extension: "jpg", mimeType: "image/jpeg", signature: [0xff, 0xd8, 0xff] },
];

/** The names the publisher gives image files; nothing else is ever served. */
const IMAGE_FILE_NAME = /^[1-9][0-9]{0,14}-(?:0|[1-9][0-9]{0,3})\.(png|jpg)$/;

/** Defaults of the image budget of one serve. */
export const imageDefaults = {
  /** Bytes all kept images of a serve may take. */
  maxImageBytes: 32 * 1024 * 1024,
  /** Runs whose images are kept (the most recent ones). */
  maxImageRuns: 50,
};

/** The type of an image display by its MIME type, if it is one the publisher keeps. */
export function imageTypeOfMime(mimeType: string): ImageFileType | undefined {
  return TYPES.find((t) => t.mimeType === mimeType);
}

/** The type of file `name`, when it is a name the publisher gives (else undefined: not an image file). */
export function imageTypeOfFile(name: string): ImageFileType | undefined {
  const match = IMAGE_FILE_NAME.exec(name);
  return match ? TYPES.find((t) => t.extension === match[1]) : undefined;
}

/** The file name of display `index` of the run whose end event is number `seq`. */
export function imageFileName(seq: number, index: number, type: ImageFileType): string {
  return `${seq}-${index}.${type.extension}`;
}

/** Whether `bytes` start with the signature of `type`. */
export function hasSignature(bytes: Uint8Array, type: ImageFileType): boolean {
  return bytes.length > type.signature.length && type.signature.every((b, i) => bytes[i] === b);
}

/** What the budget decided for one run's images. */
export interface Admission {
  /** Names of the images to write. */
  kept: string[];
  /** Names left out, with why. */
  refused: Map<string, string>;
  /** Files of earlier runs to remove now. */
  evicted: string[];
}

/** Which images to keep as runs come, and which earlier ones to remove: the bookkeeping, no files. */
export class ImageBudget {
  #runs: { names: string[]; bytes: number }[] = [];
  #total = 0;

  /** A budget of `maxBytes` over the images of the latest `maxRuns` runs. */
  constructor(readonly maxBytes: number, readonly maxRuns: number) {}

  /** Bytes kept now. */
  get total(): number {
    return this.#total;
  }

  /** Takes the images of one run, in display order: those that fit are kept, older runs make room. */
  admit(images: { name: string; size: number }[]): Admission {
    const refused = new Map<string, string>();
    const kept: string[] = [];
    let bytes = 0;
    for (const image of images) {
      if (bytes + image.size > this.maxBytes) {
        refused.set(image.name, `the dashboard keeps at most ${mib(this.maxBytes)} of images per serve`);
        continue;
      }
      kept.push(image.name);
      bytes += image.size;
    }
    const evicted: string[] = [];
    if (!kept.length) return { kept, refused, evicted };
    this.#runs.push({ names: kept, bytes });
    this.#total += bytes;
    while (this.#runs.length > this.maxRuns || this.#total > this.maxBytes) {
      const oldest = this.#runs.shift()!;
      this.#total -= oldest.bytes;
      evicted.push(...oldest.names);
    }
    return { kept, refused, evicted };
  }
}

function mib(bytes: number): string {
  return `${Math.round(bytes / 1024 / 1024)} MiB`;
}

/** A run end's images placed under `budget`: the event naming their files, what to write and remove. */
export function placeImages(
  event: RunEndEvent,
  images: Map<number, Uint8Array>,
  budget: ImageBudget,
): { event: RunEndEvent; writes: { name: string; bytes: Uint8Array }[]; evicted: string[] } {
  const displays: DisplayEntry[] = (event.displays ?? []).map((d) => ({ ...d }));
  const candidates: { name: string; size: number; bytes: Uint8Array; index: number }[] = [];
  for (const [index, bytes] of [...images].sort((a, b) => a[0] - b[0])) {
    const display = displays[index];
    if (!display) continue;
    const type = imageTypeOfMime(display.mimeType);
    if (!type || !hasSignature(bytes, type)) {
      display.notKept = "it is not a PNG or JPEG image";
      continue;
    }
    candidates.push({ name: imageFileName(event.seq, index, type), size: bytes.length, bytes, index });
  }
  const { kept, refused, evicted } = budget.admit(candidates);
  for (const c of candidates) {
    if (kept.includes(c.name)) displays[c.index].file = c.name;
    else displays[c.index].notKept = refused.get(c.name);
  }
  const writes = candidates.filter((c) => kept.includes(c.name)).map(({ name, bytes }) => ({ name, bytes }));
  return { event: { ...event, displays }, writes, evicted };
}
