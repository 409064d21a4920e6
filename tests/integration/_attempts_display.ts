/**
 * Display attempts of the adversarial suite: hostile `display` frames sent through the runtime's own
 * channel (bad mime types, forged image data, sizes that lie, oversized text, floods) and displays over
 * the per-run cap, sent honestly and with the sandbox's own cap bypassed. The host must keep nothing
 * forged, hold to the cap, say what it dropped, and keep the rest of the run.
 * @module
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import type { Attempt } from "./_adversarial.ts";
import type { Answer } from "./_serve.ts";

/** Python: png(width, height) makes a valid PNG of noise (incompressible: about 3 bytes a pixel). */
const PNG = `
import base64, struct, zlib
def png(width, height):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\\0" + os.urandom(width * 3) for _ in range(height))
    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b"")
from codemode_runtime import context
send = context.current().send
b64 = lambda data: base64.b64encode(data).decode()
`;

const images = (answer: Answer) => answer.content.filter((item) => item.type === "image");
const notes = (answer: Answer) => ((answer.structured.notes ?? []) as string[]).join("\n");

/** Display frames: forged, oversized, flooding. */
export const displays: Attempt[] = [
  {
    area: "protocol",
    name:
      "forged display frames (bad types, forged images, lying sizes, huge text, a flood) show nothing forged",
    code: PNG + `
forged = [
    {"type": "display", "mime": "application/x-sh", "size": 9, "data": "FORGED id"},
    {"type": "display", "mime": "text/x-FORGED", "size": 6, "data": "FORGED"},
    {"type": "display", "mime": "image/png", "size": 13, "data": b64(b"GIF89a-FORGED")},
    {"type": "display", "mime": "image/jpeg", "size": 9, "data": b64(b"FORGEDJPG")},
    {"type": "display", "mime": "image/png", "size": 1, "data": b64(png(40, 40))},
    {"type": "display", "mime": "image/png", "size": 8, "data": "!!!!FORGED!!"},
    {"type": "display", "mime": "image/png", "size": 3000, "data": b64(png(2, 2))[:-4] + "====", "more": True},
    {"type": "display", "mime": "text/plain", "size": 3, "text": "FORGED" * 1000, "data": "abc"},
    {"type": "display", "mime": "text/plain", "size": -5, "data": "FORGED"},
    {"type": "display", "mime": "image/png", "size": 40_000_000, "data": b64(png(30, 30)), "more": True},
    {"type": "display", "id": "run-0-forged", "mime": "text/plain", "size": 6, "data": "FORGED"},
]
for frame in forged:
    send(frame)
for i in range(2000):
    send({"type": "display", "mime": "text/plain", "size": 1, "data": "x"})
'genuine'`,
    check(answer) {
      assert.equal(answer.isError, false, answer.text.slice(0, 500));
      assert.equal(answer.structured.value, "'genuine'");
      assert.deepEqual(images(answer), [], "no forged image reaches the client");
      assert.doesNotMatch(answer.text + JSON.stringify(answer.structured), /FORGED/);
      const kept = (answer.structured.displays ?? []) as { mimeType: string }[];
      assert.ok(kept.length <= 500, `${kept.length} displays kept`);
      assert.ok(kept.every((d) => d.mimeType === "text/plain" || d.mimeType === "image/png"));
      assert.match(notes(answer), /display frame\(s\) dropped as malformed/);
      assert.match(notes(answer), /more display\(s\) dropped: a run keeps at most 500/);
    },
  },
  {
    area: "protocol",
    name:
      "a 9 MiB image over the display cap is dropped and said so, honestly sent or with the sandbox's cap bypassed",
    timeout: 60,
    code: PNG + `
big = png(1800, 1750)
print("size", len(big) > 8 * 1024 * 1024)
display(type("Big", (), {"_repr_png_": lambda self: big})())
data = b64(big)
step = 4 * 1024 * 1024
parts = [data[i:i + step] for i in range(0, len(data), step)]
for i, part in enumerate(parts):  # the same image again, past the sandbox's own check
    frame = {"type": "display", "mime": "image/png", "size": len(big), "data": part}
    if i < len(parts) - 1:
        frame["more"] = True
    send(frame)
display(type("Small", (), {"_repr_png_": lambda self: png(16, 8)})())
print("after")
'kept'`,
    check(answer) {
      assert.equal(answer.isError, false, answer.text.slice(0, 500));
      assert.equal(answer.structured.stdout, "size True\nafter\n", "the run's output is kept");
      assert.equal(answer.structured.value, "'kept'");
      assert.equal(images(answer).length, 1, "only the small image");
      assert.ok(Buffer.from(images(answer)[0].data!, "base64").length < 1000);
      const kept = answer.structured.displays as { size: number; dropped?: boolean }[];
      assert.deepEqual(kept.map((d) => Boolean(d.dropped)), [true, true, false]);
      assert.match(notes(answer), /2 display\(s\) dropped, over the 8 MiB cap on one run's displays/);
    },
  },
];
