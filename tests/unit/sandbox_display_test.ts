/**
 * Unit tests of the sandbox's display logic (display(), rich last values, the per-run cap, chunking,
 * order among output), run with the host's python3 and objects that carry IPython's _repr_*_ methods.
 * matplotlib and pandas are tested in the data-science image (tests/integration/display_test.ts).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { type DisplayFrame, type Execution, TEST_CONFIG, withPython } from "./_local_python.ts";

/** Python that defines png(width, height): a valid PNG, made with zlib only. */
const PNG = `
import struct, zlib
def png(width, height, noise=False):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    import os
    row = lambda: b"\\0" + (os.urandom(width * 3) if noise else b"\\xff\\x00\\x00" * width)
    raw = b"".join(row() for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
class Rich:
    def __init__(self, **reprs):
        self.reprs = reprs
    def __getattr__(self, name):
        if name.startswith("_repr_") and name[6:-1] in self.reprs:
            value = self.reprs[name[6:-1]]
            if isinstance(value, Exception):
                def fail(**kwargs):
                    raise value
                return fail
            return lambda **kwargs: value
        raise AttributeError(name)
    def __repr__(self):
        return "<Rich " + ",".join(sorted(self.reprs)) + ">"
`;

/** The displays' data joined per display (chunks reassembled), with their mime and text. */
function displays(
  run: Execution,
): { mime: string; size: number; text?: string; data?: string; dropped?: boolean }[] {
  const out: { mime: string; size: number; text?: string; data?: string; dropped?: boolean }[] = [];
  let open: DisplayFrame | undefined;
  for (const frame of run.displays) {
    if (open) open = { ...open, data: (open.data ?? "") + (frame.data ?? ""), more: frame.more };
    else open = frame;
    if (open.more) continue;
    const { mime, size, text, data, dropped } = open;
    out.push({
      mime,
      size,
      ...(text ? { text } : {}),
      ...(data !== undefined ? { data } : {}),
      ...(dropped ? { dropped } : {}),
    });
    open = undefined;
  }
  return out;
}

Deno.test("display() shows each object by its richest form, falling back past None and broken formatters", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      PNG + `
display(
    Rich(png=png(2, 1), html="<b>x</b>"),
    Rich(jpeg=b"\\xff\\xd8\\xff\\xe0fake"),
    Rich(svg="<svg/>", markdown="*m*"),
    Rich(png=None, markdown="**md**"),
    Rich(png=ValueError("broken"), html="<i>h</i>"),
    Rich(png=b"not a png", mimebundle={"text/markdown": "from a bundle"}),
    Rich(png=__import__("base64").b64encode(png(1, 1)).decode()),
    [1, 2],
    Rich,
)`,
    );
    assert.equal(run.done.status, "ok", run.done.error);
    const shown = displays(run);
    assert.deepEqual(shown.map((d) => d.mime), [
      "image/png",
      "image/jpeg",
      "image/svg+xml",
      "text/markdown",
      "text/html",
      "text/markdown",
      "image/png",
      "text/plain",
      "text/plain",
    ]);
    const png = Buffer.from(shown[0].data!, "base64");
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.equal(png.length, shown[0].size);
    assert.equal(png.readUInt32BE(16), 2, "width from IHDR");
    assert.equal(shown[0].text, "<Rich html,png>");
    assert.deepEqual(shown.slice(2).map((d) => d.data), [
      "<svg/>",
      "**md**",
      "<i>h</i>",
      "from a bundle",
      shown[6].data,
      "[1, 2]",
      "<class '__main__.Rich'>",
    ]);
    assert.equal(shown[5].size, Buffer.byteLength("from a bundle"));
  });
});

Deno.test("displays keep their place among printed output, fd writes included", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "import os\nprint('first')\nos.write(1, b'raw\\n')\ndisplay('table')\nprint('second', end='')\ndisplay(2)",
    );
    const order: string[] = [];
    for (const frame of run.frames) {
      const last = order.length - 1;
      if (frame.type === "output" && order[last]?.startsWith("out:")) order[last] += frame.data;
      else if (frame.type === "output") order.push(`out:${frame.data}`);
      else if (frame.type === "display") order.push(`display:${frame.data}`);
    }
    assert.deepEqual(order, ["out:first\nraw\n", "display:'table'", "out:second", "display:2"]);
  });
});

Deno.test("a rich last value is displayed instead of returned; a plain one is returned", async () => {
  await withPython(async (python) => {
    const rich = await python.execute(PNG + "Rich(markdown='# Title')");
    assert.equal(rich.done.value, undefined);
    assert.deepEqual(displays(rich).map((d) => [d.mime, d.data]), [["text/markdown", "# Title"]]);
    const plain = await python.execute("Rich(latex='$x$')");
    assert.equal(plain.done.value, "<Rich latex>");
    assert.equal(plain.displays.length, 0);
  });
});

Deno.test("display is a builtin: functions in other modules can call it", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      "import types\nm = types.ModuleType('helper')\nexec('def show(x):\\n    display(x)', m.__dict__)\nm.show('hi')",
    );
    assert.deepEqual(displays(run).map((d) => d.data), ["'hi'"]);
  });
});

Deno.test("displays over the run's cap are announced as dropped without data; the next run has its budget again", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      PNG + "display(Rich(png=png(20, 20, True)), 'fits', Rich(png=png(30, 30, True)))",
    );
    const shown = displays(run);
    assert.deepEqual(shown.map((d) => [d.mime, Boolean(d.dropped), d.data !== undefined]), [
      ["image/png", true, false],
      ["text/plain", false, true],
      ["image/png", true, false],
    ]);
    assert.ok(shown[0].size > 1000 && shown[2].size > shown[0].size);
    const again = await python.execute("display('x' * 900)");
    assert.equal(displays(again)[0].dropped, undefined);
  }, { ...TEST_CONFIG, max_display: 1000 });
});

Deno.test("a run sends at most 500 displays; the rest are announced as dropped", async () => {
  await withPython(async (python) => {
    const run = await python.execute("for i in range(503): display(i)");
    const shown = displays(run);
    assert.equal(shown.length, 503);
    assert.equal(shown.filter((d) => d.dropped).length, 3);
    assert.equal(shown[499].data, "499");
  });
});

Deno.test("a display larger than one frame arrives in chunks that reassemble to the original bytes", async () => {
  await withPython(async (python) => {
    const run = await python.execute(
      PNG +
        "import hashlib\nimage = png(1200, 1200, True)\ndisplay(Rich(png=image))\nprint(len(image), hashlib.sha256(image).hexdigest())",
      { timeout: 60 }, // generous: a few MB through a pipe on a busy machine
    );
    assert.ok(run.displays.length >= 2, `${run.displays.length} frames`);
    assert.ok(run.displays.slice(0, -1).every((f) => f.more) && !run.displays.at(-1)!.more);
    const [size, digest] = run.stdout.trim().split(" ");
    const data = Buffer.from(displays(run)[0].data!, "base64");
    assert.equal(data.length, Number(size));
    const hash = await crypto.subtle.digest("SHA-256", data);
    assert.equal(Buffer.from(hash).toString("hex"), digest);
  }, { ...TEST_CONFIG, max_display: 64 * 1024 * 1024 });
});

Deno.test("a server proxy as the last value is returned as its repr, without probing it for tools", async () => {
  await withPython(async (python) => {
    const run = await python.execute("mcp_my_server", { answer: () => ({ value: [] }) });
    assert.equal(run.rpcs.length, 0);
    assert.equal(run.displays.length, 0);
    assert.match(run.done.value ?? "", /^<MCP server 'my-server' as mcp_my_server/);
    assert.equal(run.stderr, "", "no coroutine was left unawaited");
  });
});
