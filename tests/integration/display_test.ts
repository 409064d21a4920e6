/**
 * Rich display end to end: real matplotlib, pandas and pillow in the default (data-science) image, on
 * podman and docker, through a real `codemode serve` and the SDK client. A plot comes back as a PNG image
 * item that decodes to the figure's size, in its place among the printed text; a DataFrame as a text
 * table; figures left open are shown once and closed; displays over CODEMODE_MAX_DISPLAY are dropped
 * and the result says so. Runs with the default sandbox limits (512m memory, read-only root, uid 65534).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { docker } from "../../plugins/runtime/docker.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { type Answer, runWithin, serve, type Served } from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { decodePng } from "./_png.ts";

const engines: [string, RuntimePlugin & ImageStore][] = [["podman", podman()], ["docker", docker()]];

/** Runs `code`, failing unless it is answered within two minutes (first imports are slow on a busy machine). */
const run = (s: Served, code: string, timeout = 60): Promise<Answer> => runWithin(s, code, timeout, 180_000);
const images = (a: Answer) => a.content.filter((item) => item.type === "image");
const texts = (a: Answer) => a.content.filter((item) => item.type === "text").map((item) => item.text);

for (const [engine, runtime] of engines) {
  const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
  if (!usable) console.warn(`IGNORED display suite on ${engine}: engine or image ${TEST_IMAGE} missing`);
  let served: Served | undefined;
  const session = async () =>
    served ??= await serve({ CODEMODE_RUNTIME: engine, CODEMODE_IMAGE: TEST_IMAGE, CODEMODE_TIMEOUT: "60" });
  const test = (name: string, fn: (s: Served) => Promise<void>) =>
    Deno.test({
      name: `${engine}: ${name}`,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => fn(await session()),
    });

  test("the image has the data-science libraries", async (s) => {
    const r = await run(
      s,
      "import matplotlib, numpy, pandas, PIL, scipy, sklearn, sympy\nmatplotlib.get_backend()",
    );
    assert.equal(
      r.structured.value,
      "'module://codemode_runtime.mpl_backend'",
      `${TEST_IMAGE} must be the default image (codemode image build): ${r.text.slice(0, 500)}`,
    );
  });

  test("plt.show() sends the plot as a PNG image item between the text printed around it", async (s) => {
    const r = await run(
      s,
      `
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.plot([1, 2, 3], [4, 1, 9])
print("before the plot")
plt.show()
print("after the plot")`,
    );
    assert.equal(r.isError, false, r.text);
    assert.deepEqual(r.content.map((item) => item.type), ["text", "image", "text"]);
    assert.deepEqual(texts(r), ["before the plot", "after the plot"]);
    const [image] = images(r);
    assert.equal(image.mimeType, "image/png");
    assert.deepEqual(decodePng(image.data!), { width: 400, height: 300 });
    assert.deepEqual(r.structured.displays, [{
      mimeType: "image/png",
      size: Buffer.from(image.data!, "base64").length,
      text: "<Figure size 400x300 with 1 Axes>",
    }]);
  });

  test("figures left open are shown at the end of the run, once, and closed", async (s) => {
    const r = await run(
      s,
      `
import matplotlib.pyplot as plt
first = plt.figure(figsize=(2, 2), dpi=50)
plt.plot([0, 1])
display(first)                    # shown now; unchanged since, so not again at the end
plt.figure(figsize=(3, 1), dpi=100)
plt.bar(["a", "b"], [3, 5])`,
    );
    assert.equal(r.isError, false, r.text);
    assert.deepEqual(images(r).map((image) => decodePng(image.data!)), [
      { width: 100, height: 100 },
      { width: 300, height: 100 },
    ]);
    const after = await run(s, "import matplotlib.pyplot as plt\nplt.get_fignums()");
    assert.equal(after.structured.value, "[]");
    assert.equal(images(after).length, 0);
  });

  test("a DataFrame as the last expression comes back as a text table, not HTML", async (s) => {
    const r = await run(
      s,
      `
import pandas as pd
df = pd.DataFrame({"city": ["Oslo", "Lima"], "sales": [1200, 950]})
print("monthly sales")
df`,
    );
    assert.equal(r.isError, false, r.text);
    const table = "   city  sales\n0  Oslo   1200\n1  Lima    950\n\n[2 rows x 2 columns]";
    assert.equal(r.text, `monthly sales\n${table}\n`);
    assert.equal(r.structured.value, undefined, "displayed, not returned as a repr");
    assert.deepEqual(r.structured.displays, [{ mimeType: "text/plain", size: table.length, text: table }]);
    assert.doesNotMatch(r.text, /<table|<td/);
    const series = await run(s, "display(df['sales'])");
    assert.equal(series.text, "0    1200\n1     950\nName: sales, Length: 2, dtype: int64\n");
  });

  test("pillow images display as PNG; numpy and pandas import and plot within the default memory", async (s) => {
    const r = await run(
      s,
      `
import matplotlib.pyplot as plt, numpy as np, pandas as pd
from PIL import Image
display(Image.new("RGB", (64, 32), "teal"))
frame = pd.DataFrame(np.random.default_rng(1).normal(size=(200_000, 8)))
fig, ax = plt.subplots(figsize=(5, 2), dpi=80)
frame.cumsum().plot(ax=ax, legend=False)
int(frame.shape[0])`,
    );
    assert.equal(r.isError, false, r.text);
    assert.deepEqual(images(r).map((image) => decodePng(image.data!)), [
      { width: 64, height: 32 },
      { width: 400, height: 160 },
    ]);
    assert.equal(r.structured.value, "200000");
  });
}

// The cap needs a serve of its own; one engine shows it (the logic is the host's, not the engine's).
const [capEngine, capRuntime] = engines[0];
const capUsable = (await capRuntime.detect()).available && await capRuntime.imageExists(TEST_IMAGE);
Deno.test({
  name: `${capEngine}: displays beyond CODEMODE_MAX_DISPLAY are dropped and the text says which`,
  ignore: !capUsable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s = await serve({
      CODEMODE_RUNTIME: capEngine,
      CODEMODE_IMAGE: TEST_IMAGE,
      CODEMODE_MAX_DISPLAY: "300k",
    });
    try {
      // Noise does not compress: each image is a little over 120,000 bytes, so two fit under 300 KiB.
      const r = await run(
        s,
        `
import numpy as np
from PIL import Image
noise = lambda: Image.fromarray(np.random.default_rng().integers(0, 256, (200, 200, 3), dtype=np.uint8))
for i in range(3):
    print("image", i)
    display(noise())
print("done")`,
      );
      assert.equal(r.isError, false, r.text);
      assert.equal(images(r).length, 2);
      const displays = r.structured.displays as { size: number; dropped?: boolean }[];
      assert.deepEqual(displays.map((d) => Boolean(d.dropped)), [false, false, true]);
      assert.ok(displays.every((d) => d.size > 120_000 && d.size < 125_000), JSON.stringify(displays));
      const notes = (r.structured.notes as string[]).join("\n");
      assert.match(
        notes,
        /1 display\(s\) dropped, over the 300 KiB cap on one run's displays \(CODEMODE_MAX_DISPLAY\): image\/png \(11\d\.\d KiB\)/,
      );
      assert.match(texts(r).join("\n"), /image 2\n(.|\n)*done\nnote: 1 display\(s\) dropped/);
      assert.equal(r.structured.stdout, "image 0\nimage 1\nimage 2\ndone\n", "nothing else is lost");
    } finally {
      await s.close();
    }
  },
});
