/**
 * core/observe/span_export.ts: spans are exported by a worker thread, not the serve's event loop (they
 * reach a collector while the main thread is busy), and what waits for export is bounded (spans beyond
 * the queue size are dropped, counted and warned about once; shutdown does not wait past its deadline for
 * a collector that never answers).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, type Socket } from "node:net";
import { createInterface } from "node:readline";
import process from "node:process";
import { setLogLevel, setLogSink } from "../../core/observe/log.ts";
import { exportStatus, inSpan, startTracing, stopTracing } from "../../core/observe/trace.ts";

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });

const options = (url: string, env: Record<string, string>) => ({
  url,
  env,
  content: false,
  version: "test",
  node: "node-a",
  redact: (text: string) => text,
});

test("spans reach the collector while the main thread is busy: the export runs in a worker", async () => {
  const child = spawn(process.execPath, ["run", "-A", "tests/integration/_otlp_receiver_process.ts"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: { url?: string; at?: number; name?: string }[] = [];
  const arrived = (name: string) => lines.find((line) => line.name === name);
  createInterface({ input: child.stdout! }).on("line", (line) => lines.push(JSON.parse(line)));
  const waitFor = async (found: () => unknown, what: string) => {
    const deadline = Date.now() + 60_000;
    while (!found()) {
      if (Date.now() > deadline) throw new Error(`${what} not within 60 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  try {
    await waitFor(() => lines[0]?.url, "the receiver");
    assert.ok(await startTracing(options(`${lines[0].url}/v1/traces`, { OTEL_BSP_SCHEDULE_DELAY: "50" })));
    // The worker is loaded (its first export arrived) before the main thread gets busy.
    await inSpan("warm-up", {}, () => Promise.resolve());
    await waitFor(() => arrived("warm-up"), "the first span");
    await inSpan("while-busy", {}, () => Promise.resolve());
    // Past the moment ended spans are handed to the worker, the main thread spins: no timer, no I/O of
    // its own can run until it stops.
    await new Promise((r) => setTimeout(r, 200));
    const busyFrom = Date.now();
    while (Date.now() - busyFrom < 5_000) { /* busy */ }
    const busyUntil = Date.now();
    await waitFor(() => arrived("while-busy"), "the span ended before the busy spell");
    const at = arrived("while-busy")!.at!;
    assert.ok(at < busyUntil, `the span arrived ${at - busyUntil} ms after the main thread was free again`);
    await stopTracing(5_000);
  } finally {
    await stopTracing(0);
    child.kill();
  }
});

test("a collector that never answers: spans beyond the queue are dropped, counted, warned about once; shutdown keeps its deadline", async () => {
  // A collector that accepts connections and never answers: every export hangs until its timeout.
  const sockets: Socket[] = [];
  const silent = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const { port } = silent.address() as { port: number };
  const logged: Record<string, unknown>[] = [];
  setLogSink((line) => logged.push(JSON.parse(line)));
  setLogLevel("warn");
  process.env.OTEL_EXPORTER_OTLP_TIMEOUT = "30000";
  try {
    assert.ok(
      await startTracing(
        options(`http://127.0.0.1:${port}/v1/traces`, {
          OTEL_BSP_SCHEDULE_DELAY: "20",
          OTEL_BSP_MAX_QUEUE_SIZE: "10",
        }),
      ),
    );
    for (let i = 0; i < 30; i++) await inSpan(`span-${i}`, {}, () => Promise.resolve());
    assert.equal(exportStatus()?.dropped, 20);
    const drops = logged.filter((line) => String(line.msg).startsWith("spans dropped"));
    assert.equal(drops.length, 1, JSON.stringify(logged));
    assert.equal(drops[0].dropped, 1);
    // The worker has loaded once the collector sees its connection (its loading has a bound of its own).
    const loaded = Date.now() + 60_000;
    while (sockets.length === 0 && Date.now() < loaded) await new Promise((r) => setTimeout(r, 20));
    assert.ok(sockets.length > 0, "the export worker never connected");
    const started = Date.now();
    await stopTracing(500);
    assert.ok(Date.now() - started < 5_000, `shutdown took ${Date.now() - started} ms`);
  } finally {
    delete process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
    setLogSink((line) => process.stderr.write(line + "\n"));
    for (const socket of sockets) socket.destroy();
    silent.close();
  }
});
