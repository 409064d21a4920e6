/**
 * Rich display on the embedded Pyodide runtime, through a real `codemode serve` and the SDK client: what
 * its offline package set allows (display(), objects' _repr_*_ methods, text forms) works as in containers;
 * matplotlib, pandas and pillow are not there (docs/pyodide.md).
 */
import assert from "node:assert/strict";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { runWithin, serve } from "./_serve.ts";
import { decodePng } from "./_png.ts";

const usable = (await pyodide().detect()).available;
if (!usable) console.warn("IGNORED display on pyodide: deno or the Pyodide package is missing");

Deno.test({
  name: "on pyodide, display() sends images and text in order; the data-science libraries are absent",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s = await serve({ CODEMODE_RUNTIME: "pyodide", CODEMODE_TIMEOUT: "60" });
    try {
      const r = await runWithin(
        s,
        `
tiny = [i for i in await mcp_everything.get_tiny_image() if isinstance(i, bytes)][0]
class Picture:
    def _repr_png_(self):
        return bytes(tiny)
class Note:
    def _repr_markdown_(self):
        return "**note**"
print("before")
display(Picture())
missing = []
for name in ("matplotlib", "pandas", "PIL", "numpy"):
    try:
        __import__(name)
    except ImportError:
        missing.append(name)
print("missing", missing)
Note()`,
        60,
        240_000,
      );
      assert.equal(r.isError, false, r.text);
      assert.deepEqual(r.content.map((item) => item.type), ["text", "image", "text"]);
      assert.equal(r.content[0].text, "before");
      assert.equal(r.content[2].text, "missing ['matplotlib', 'pandas', 'PIL', 'numpy']\n**note**");
      const size = decodePng(r.content[1].data!);
      assert.ok(size.width > 0 && size.height > 0);
      assert.deepEqual((r.structured.displays as { mimeType: string }[]).map((d) => d.mimeType), [
        "image/png",
        "text/markdown",
      ]);
    } finally {
      await s.close();
    }
  },
});
