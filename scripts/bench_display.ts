/**
 * Section "display" (issue 13): a warm run_python that plots one matplotlib figure and leaves it open, so
 * it is rendered to PNG at the end of the run and comes back as an image item, against the same run that
 * closes the figure instead (everything but the rendering, the display frame and the image item). Through
 * a real `codemode serve` (from source, podman runtime) and the SDK client, in the default image.
 * @module
 */
import { Buffer } from "node:buffer";
import {
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  type Row,
  row,
  type SectionResult,
  startServe,
  works,
} from "./bench_harness.ts";

/** Counts of the display section. */
export const counts = { runs: 40, warmup: 3 };

const SETUP = "import matplotlib.pyplot as plt\nxs = list(range(100))\nys = [x * x % 37 for x in xs]";
const PLOT = "fig, ax = plt.subplots()\nax.plot(xs, ys)\nax.set_title('warm')";
const WITH_FIGURE = PLOT;
const WITHOUT_FIGURE = `${PLOT}\nplt.close(fig)`;

/** Runs the display section. */
export async function benchDisplay(): Promise<SectionResult> {
  const result: SectionResult = { name: "display", rows: [], notes: [] };
  const image = process.env.CODEMODE_IMAGE ?? IMAGE;
  if (!(await works("podman", ["image", "exists", image]))) {
    result.skipped = `podman or the image "${image}" is missing (build it: codemode image build)`;
    return result;
  }
  const home = fakeHome(() => ({}));
  const served = await startServe({ home, env: { CODEMODE_RUNTIME: "podman", CODEMODE_IMAGE: image } });
  try {
    const probe = await served.run(`${SETUP}\nimport matplotlib\nmatplotlib.__version__`);
    result.notes.push(`matplotlib ${probe.structured.value} in ${image}; a 640x480 figure at 100 dpi`);
    let pngBytes = 0;
    const time = async (code: string) => {
      const start = performance.now();
      const r = await served.client.callTool({ name: "run_python", arguments: { code } }, {
        timeout: 120_000,
      });
      const ms = performance.now() - start;
      if (r.isError) throw new Error(`run_python failed: ${JSON.stringify(r.content).slice(0, 500)}`);
      const images = (r.content as { type: string; data?: string }[]).filter((c) => c.type === "image");
      if (images.length) pngBytes = Buffer.from(images[0].data!, "base64").length;
      return { ms, images: images.length };
    };
    for (let i = 0; i < counts.warmup; i++) {
      await time(WITH_FIGURE);
      await time(WITHOUT_FIGURE);
    }
    // Interleaved, so load from other work on the machine falls on both alike.
    const withFigure: number[] = [];
    const without: number[] = [];
    for (let i = 0; i < counts.runs; i++) {
      const a = await time(WITH_FIGURE);
      const b = await time(WITHOUT_FIGURE);
      if (a.images !== 1 || b.images !== 0) {
        throw new Error("The figure run must return one image, the other none");
      }
      withFigure.push(a.ms);
      without.push(b.ms);
    }
    const rows: Row[] = [];
    for (const [label, q] of [["p50", 0.5], ["p95", 0.95]] as const) {
      rows.push(row({
        section: "display",
        metric: `warm run that displays one matplotlib figure (PNG image item), ${label}`,
        value: percentile(withFigure, q),
        unit: "ms",
        baseline: { label: "the same run closing the figure instead", value: percentile(without, q) },
        note: label === "p50"
          ? `PNG ${(pngBytes / 1024).toFixed(1)} KiB; ${counts.runs} runs each`
          : undefined,
      }));
    }
    result.rows.push(...rows);
  } finally {
    await served.close();
    await removeLeftovers();
    removeHome(home);
  }
  return result;
}
