/**
 * Section "dashboard" (issue 16): the page's weight and its time to first paint in headless Chromium
 * (against a one-line static page from a plain node:http server, in the same browser), and runs per
 * second on one `codemode serve --http` with its dashboard open in a browser against closed, in the same
 * run, alternating, plus a serve with activity publishing off (CODEMODE_ACTIVITY=0): the cost of
 * publishing and of watching. Also the latency of a run that displays a matplotlib figure on both serves:
 * what keeping the run's image as a file for the dashboard adds.
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import type { Browser, Page } from "puppeteer-core";
import { fakeHome, IMAGE, percentile, removeHome, row, type SectionResult, works } from "./bench_harness.ts";
import { connect, type HttpServe, type LoadClient, startHttpServe } from "./bench_load.ts";
import { CHROMIUM, launchBrowser } from "../tests/integration/_browser.ts";

/** Counts of the dashboard section. */
export const counts = { paints: 12, clients: 4, runs: 50, rounds: 5, imageRuns: 20 };

/** A run that displays one matplotlib figure (about 25 KiB of PNG). */
const FIGURE_RUN = "plt.figure(figsize=(6, 4)); plt.plot([i * i for i in range(100)]); None";

/** Median milliseconds of `counts.imageRuns` sequential runs that each display a figure. */
async function figureRunMs(client: LoadClient): Promise<number[]> {
  await client.run("import matplotlib.pyplot as plt");
  await client.run(FIGURE_RUN); // warm: matplotlib's first figure costs more
  const times: number[] = [];
  for (let i = 0; i < counts.imageRuns; i++) {
    const started = performance.now();
    await client.run(FIGURE_RUN);
    times.push(performance.now() - started);
  }
  return times;
}

const TOKEN = "bench-dashboard-token";

/** First paint and first contentful paint of `url` in a fresh page with an empty cache, in ms. */
async function paints(browser: Browser, url: string, ready?: (page: Page) => Promise<unknown>) {
  const page = await browser.newPage();
  try {
    await page.setCacheEnabled(false);
    const started = Date.now();
    await page.goto(url, { waitUntil: "load" });
    await ready?.(page);
    const readyMs = Date.now() - started;
    // Paint entries can arrive after "load" (a page this small may not have painted yet): wait for the
    // first contentful paint, up to 5 s, instead of reading an empty list as no paint at all.
    const entries = await page.evaluate(() =>
      new Promise<[string, number][]>((resolve) => {
        const read = () =>
          performance.getEntriesByType("paint").map((e) => [e.name, e.startTime] as [string, number]);
        const done = () => read().some(([name]) => name === "first-contentful-paint");
        if (done()) return resolve(read());
        new PerformanceObserver(() => done() && resolve(read())).observe({ type: "paint", buffered: true });
        setTimeout(() => resolve(read()), 5_000);
      })
    );
    const get = (name: string) => entries.find(([n]) => n === name)?.[1] ?? NaN;
    return { fp: get("first-paint"), fcp: get("first-contentful-paint"), readyMs };
  } finally {
    await page.close();
  }
}

/** A note for loads that reported no first contentful paint (left out of the medians, never read as 0). */
function unpainted(dash: { fcp: number }[], bare: { fcp: number }[]): string {
  const missing = (loads: { fcp: number }[]) => loads.filter((load) => !Number.isFinite(load.fcp)).length;
  const [d, b] = [missing(dash), missing(bare)];
  return d || b ? `; loads with no paint entry left out: dashboard ${d}, static page ${b}` : "";
}

/** A one-line page from a plain server: the floor of any page's first paint here. */
async function staticPage(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end('<!doctype html><html lang="en"><meta charset="utf-8"><title>t</title><h1>codemode</h1></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Runs/s of `clients` clients making `runs` runs each (two proxied calls a run) at once. */
async function throughput(clients: LoadClient[], runs: number): Promise<number> {
  const started = performance.now();
  await Promise.all(clients.map(async (client, c) => {
    for (let r = 0; r < runs; r++) {
      await client.run(
        `await asyncio.gather(mcp_everything.echo(message="c${c}r${r}"), ` +
          `mcp_everything.get_sum(a=${c}, b=${r}))`,
      );
    }
  }));
  return (clients.length * runs) / ((performance.now() - started) / 1000);
}

async function clientsOf(served: HttpServe): Promise<LoadClient[]> {
  const clients = await Promise.all(
    Array.from({ length: counts.clients }, () => connect(served.url, { authorization: `Bearer ${TOKEN}` })),
  );
  for (const c of clients) await c.run("import asyncio");
  await throughput(clients, 5); // warm-up: sandboxes started, upstream servers connected
  return clients;
}

/** Runs the dashboard section. */
export async function benchDashboard(): Promise<SectionResult> {
  const result: SectionResult = { name: "dashboard", rows: [], notes: [] };
  if (!existsSync(CHROMIUM)) {
    result.skipped = `no browser at ${CHROMIUM} (apt-get install chromium)`;
    return result;
  }
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const browser = await launchBrowser();
  const homes: string[] = [];
  const serves: HttpServe[] = [];
  const clients: LoadClient[] = [];
  const plain = await staticPage();
  try {
    // Throughput with publishing off: a serve of its own, measured alone.
    const offHome = fakeHome();
    homes.push(offHome);
    const off = await startHttpServe(offHome, { CODEMODE_ACTIVITY: "0", CODEMODE_HTTP_TOKEN: TOKEN });
    serves.push(off);
    let offClients = await clientsOf(off);
    clients.push(...offClients);
    const offRates: number[] = [];
    for (let i = 0; i < counts.rounds; i++) offRates.push(await throughput(offClients, counts.runs));
    const offFigure = await figureRunMs(offClients[0]);
    await Promise.all(offClients.map((c) => c.end()));
    offClients = [];
    clients.length = 0;
    await off.stop();

    const home = fakeHome();
    homes.push(home);
    const served = await startHttpServe(home, { CODEMODE_HTTP_TOKEN: TOKEN });
    serves.push(served);
    const root = served.url.replace(/mcp$/, "");

    // The page's weight: the page and every file it loads, as the server sends them.
    const weightPage = await browser.newPage();
    const sizes = new Map<string, number>();
    weightPage.on("response", async (response) => {
      if (!response.url().startsWith(root)) return;
      try {
        sizes.set(new URL(response.url()).pathname, (await response.buffer()).length);
      } catch { /* a stream (the live updates) has no body to measure */ }
    });
    await weightPage.goto(`${root}?token=${TOKEN}`, { waitUntil: "networkidle2" });
    await weightPage.close();
    const assetBytes = [...sizes].filter(([path]) => path === "/" || path.startsWith("/assets/"));
    const total = assetBytes.reduce((n, [, size]) => n + size, 0);
    const libraries = ["/assets/preact.mjs", "/assets/hooks.mjs", "/assets/htm.mjs"]
      .reduce((n, path) => n + (sizes.get(path) ?? 0), 0);

    // First paint: the dashboard (signed in by the cookie the weight page got) against the plain page.
    const dash: { fp: number; fcp: number; readyMs: number }[] = [];
    const bare: { fp: number; fcp: number; readyMs: number }[] = [];
    for (let i = 0; i < counts.paints; i++) {
      bare.push(await paints(browser, plain.url));
      dash.push(await paints(browser, root, (page) => page.waitForSelector('[data-link="live"]')));
    }

    // Throughput with publishing on: dashboard closed and open, alternating.
    const onClients = await clientsOf(served);
    clients.push(...onClients);
    const closedRates: number[] = [];
    const openRates: number[] = [];
    for (let i = 0; i < counts.rounds; i++) {
      closedRates.push(await throughput(onClients, counts.runs));
      const page = await browser.newPage();
      await page.goto(root, { waitUntil: "load" });
      await page.waitForSelector('[data-link="live"]');
      openRates.push(await throughput(onClients, counts.runs));
      await page.close();
    }
    const onFigure = await figureRunMs(onClients[0]);
    const median = (xs: number[]) => percentile(xs, 0.5);
    const fcp = dash.map((d) => d.fcp).filter(Number.isFinite);
    result.rows.push(
      row({
        section: "dashboard",
        metric: `page weight: / and the ${assetBytes.length - 1} files it loads (uncompressed)`,
        value: total / 1024,
        unit: "KiB",
        baseline: { label: "Preact + hooks + htm alone", value: libraries / 1024 },
        note: assetBytes.map(([path, size]) => `${path.replace("/assets/", "")} ${(size / 1024).toFixed(1)}`)
          .join(", "),
      }),
      row({
        section: "dashboard",
        metric: `first contentful paint, median of ${counts.paints} cold loads`,
        value: median(fcp),
        unit: "ms",
        baseline: {
          label: "one-line static page, same browser",
          value: median(bare.map((b) => b.fcp).filter(Number.isFinite)),
        },
        note: `first paint ${median(dash.map((d) => d.fp).filter(Number.isFinite)).toFixed(0)} ms; p95 FCP ${
          percentile(fcp, 0.95).toFixed(0)
        } ms${unpainted(dash, bare)}`,
      }),
      row({
        section: "dashboard",
        metric: "to live data (load, module graph, SSE snapshot rendered), median",
        value: median(dash.map((d) => d.readyMs)),
        unit: "ms",
        baseline: { label: "static page loaded", value: median(bare.map((b) => b.readyMs)) },
      }),
      row({
        section: "dashboard",
        metric: `runs/s, ${counts.clients} clients, dashboard open in a browser`,
        value: median(openRates),
        unit: "runs/s",
        baseline: { label: "same serve, dashboard closed", value: median(closedRates) },
        note: `rounds open ${openRates.map((r) => r.toFixed(0)).join("/")}, closed ${
          closedRates.map((r) => r.toFixed(0)).join("/")
        }`,
      }),
      row({
        section: "dashboard",
        metric: `runs/s, ${counts.clients} clients, activity published, dashboard closed`,
        value: median(closedRates),
        unit: "runs/s",
        baseline: { label: "a serve with CODEMODE_ACTIVITY=0", value: median(offRates) },
        note: `rounds off ${offRates.map((r) => r.toFixed(0)).join("/")}`,
      }),
      row({
        section: "dashboard",
        metric:
          `a run displaying a matplotlib figure, image kept for the dashboard, p50 of ${counts.imageRuns}`,
        value: median(onFigure),
        unit: "ms",
        baseline: { label: "same run, CODEMODE_ACTIVITY=0", value: median(offFigure) },
        note: `p95 ${percentile(onFigure, 0.95).toFixed(1)} ms against ${
          percentile(offFigure, 0.95).toFixed(1)
        } ms`,
      }),
    );
    result.notes.push(
      `throughput: ${counts.clients} clients x ${counts.runs} runs per round, ${counts.rounds} rounds per case; ` +
        "each run makes two proxied calls (echo, get-sum) under asyncio.gather; medians of the rounds",
      "clients, the browser and the serve share the machine's cores",
    );
  } finally {
    await Promise.allSettled(clients.map((c) => c.end()));
    await Promise.allSettled(serves.map((s) => s.stop()));
    await browser.close();
    await plain.close();
    for (const home of homes) removeHome(home);
  }
  return result;
}
