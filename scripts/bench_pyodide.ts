/**
 * Section "pyodide" (issue 5): the embedded Pyodide runtime's first call and warm round trip through
 * the MCP client, each beside the podman runtime's figure taken in the same run.
 * @module
 */
import {
  catalogIndexed,
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  row,
  type SectionResult,
  startServe,
  timeEach,
  works,
} from "./bench_harness.ts";

/** Counts of the pyodide section. */
export const counts = { warm: 100, warmup: 5 };

interface RuntimeFigures {
  firstMs: number;
  warmP50: number;
  warmP95: number;
}

/** First call of a fresh serve (after runtime selection and indexing) and warm print(1) timings. */
async function figures(home: string, runtime: string): Promise<RuntimeFigures> {
  // No prewarm: the first call's figure is meant to include the sandbox start.
  const served = await startServe({ home, env: { CODEMODE_RUNTIME: runtime, CODEMODE_PREWARM: "off" } });
  try {
    await served.runtimeSelected(180_000);
    await catalogIndexed(home, 3);
    const start = performance.now();
    await served.run("print(1)");
    const firstMs = performance.now() - start;
    const warm = await timeEach(counts.warm, counts.warmup, () => served.run("print(1)"));
    return { firstMs, warmP50: percentile(warm, 0.5), warmP95: percentile(warm, 0.95) };
  } finally {
    await served.close();
  }
}

/** Runs the pyodide section. */
export async function benchPyodide(): Promise<SectionResult> {
  const result: SectionResult = { name: "pyodide", rows: [], notes: [] };
  const home = fakeHome();
  try {
    // The first Pyodide sandbox of a state directory also makes the start-up snapshot; later ones load it.
    const snapshotStart = performance.now();
    let making: RuntimeFigures;
    try {
      making = await figures(home, "pyodide");
    } catch (error) {
      result.skipped = `the pyodide runtime did not run: ${(error as Error).message}`;
      return result;
    }
    const makingMs = performance.now() - snapshotStart;
    const pyodide = await figures(home, "pyodide");
    const podman = await works("podman", ["image", "exists", IMAGE])
      ? await figures(home, "podman")
      : undefined;
    if (!podman) result.notes.push(`podman or "${IMAGE}" is missing: no podman baseline`);
    const baseline = (label: string, value: number | undefined) =>
      value === undefined ? undefined : { label, value };
    result.rows.push(
      row({
        section: "pyodide",
        metric: "first call, fresh serve, snapshot cached",
        value: pyodide.firstMs,
        unit: "ms",
        baseline: baseline("podman first call, fresh serve", podman?.firstMs),
        note: "runtime selection done before the call",
      }),
      row({
        section: "pyodide",
        metric: "first call ever (makes the start-up snapshot)",
        value: making.firstMs,
        unit: "ms",
        baseline: baseline("podman first call, fresh serve", podman?.firstMs),
        note: `whole serve, spawn to close: ${(makingMs / 1000).toFixed(1)} s`,
      }),
      row({
        section: "pyodide",
        metric: `warm print(1) p50 (${counts.warm} calls)`,
        value: pyodide.warmP50,
        unit: "ms",
        baseline: baseline("podman warm p50, same run", podman?.warmP50),
        note: `p95 ${pyodide.warmP95.toFixed(2)} ms (podman ${podman?.warmP95.toFixed(2) ?? "-"} ms)`,
      }),
    );
  } finally {
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    removeHome(home);
  }
  return result;
}
