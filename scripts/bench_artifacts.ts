/**
 * Section "artifacts" (issue 13): a 10 MB artifact from the write in the sandbox to the bytes in the MCP
 * client's hands, on podman. Baselines from the same run and the same container:
 * - the same run_python writing the same 10 MB to /tmp instead (no artifact), so what is left over is the
 *   cost of collecting, sending and storing the file;
 * - `podman cp` of the same file out of the same container: the engine's own way to copy a file out,
 *   which a client would otherwise have to script (given access to the engine).
 * The client reads it back three ways: resources/read over Streamable HTTP, `GET /artifacts/...` under
 * `serve --http`, and resources/read over stdio with the TypeScript SDK's client, whose line buffer
 * copies and rescans the whole message for every 64 KiB that arrives.
 * @module
 */
import { Buffer } from "node:buffer";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  exec,
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  row,
  sandboxOf,
  type SectionResult,
  startServe,
  works,
} from "./bench_harness.ts";
import { startHttpServe } from "./bench_load.ts";

/** Counts of the artifacts section. */
export const counts = { runs: 15, warmup: 3, stdioReads: 3, bytes: 10 * 1000 * 1000 };

// Random bytes made before the clock starts; each run rotates them, so every run's file is a changed one.
const PREPARE = `import os\nDATA = os.urandom(${counts.bytes})`;
const writeTo = (path: string) => `DATA = DATA[1:] + DATA[:1]\nopen("${path}", "wb").write(DATA)\nNone`;

interface Session {
  client: Client;
  /** Calls run_python; returns the first artifact's URI, if any. */
  run(code: string): Promise<string | undefined>;
  /** resources/read; returns the decoded size. */
  read(uri: string): Promise<number>;
}

function session(client: Client): Session {
  return {
    client,
    async run(code) {
      const r = await client.callTool({ name: "run_python", arguments: { code } }, { timeout: 180_000 });
      if (r.isError) throw new Error(`run_python failed: ${JSON.stringify(r.content).slice(0, 300)}`);
      return (r.content as { type: string; uri?: string }[]).find((c) => c.type === "resource_link")?.uri;
    },
    async read(uri) {
      const read = await client.readResource({ uri }, { timeout: 180_000 });
      return Buffer.from((read.contents[0] as { blob: string }).blob, "base64").length;
    },
  };
}

/** Downloads `path` with the session's id; returns the byte count. */
function download(url: string, path: string, sessionId: string): Promise<number> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: target.hostname, port: target.port, path, headers: { "mcp-session-id": sessionId } },
      (res) => {
        let size = 0;
        res.on("data", (d: Uint8Array) => (size += d.length)).on("end", () => {
          if (res.statusCode !== 200) reject(new Error(`GET ${path} answered ${res.statusCode}`));
          else resolve(size);
        });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const timed = async <T>(fn: () => Promise<T>): Promise<[number, T]> => {
  const start = performance.now();
  const value = await fn();
  return [performance.now() - start, value];
};

/** Runs the artifacts section. */
export async function benchArtifacts(): Promise<SectionResult> {
  const result: SectionResult = { name: "artifacts", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or "${IMAGE}" is missing`;
    return result;
  }
  const home = fakeHome(() => ({}));
  const copies = mkdtempSync(join(tmpdir(), "codemode-bench-cp-"));
  const http = await startHttpServe(home);
  const transport = new StreamableHTTPClientTransport(new URL(http.url));
  const client = new Client({ name: "codemode-bench-artifacts", version: "1" });
  try {
    await client.connect(transport);
    const s = session(client);
    await s.run(PREPARE);
    const container = await sandboxOf(http.pid);
    if (!container) throw new Error("the serve's sandbox container was not found");
    const downloadPath = (uri: string) => `/artifacts/${uri.slice("codemode://artifacts/".length)}`;
    const t = {
      run: [] as number[],
      read: [] as number[],
      get: [] as number[],
      plain: [] as number[],
      cp: [] as number[],
    };
    let sizes = new Set<number>();
    for (let i = 0; i < counts.warmup + counts.runs; i++) {
      // Interleaved, so drifting load on the machine touches every figure alike.
      const [runMs, uri] = await timed(() => s.run(writeTo("/workspace/artifacts/data.bin")));
      if (!uri) throw new Error("the run listed no artifact");
      const [readMs, readSize] = await timed(() => s.read(uri));
      const [getMs, getSize] = await timed(() => download(http.url, downloadPath(uri), transport.sessionId!));
      const [plainMs] = await timed(() => s.run(writeTo("/tmp/data.bin")));
      const [cpMs, cp] = await timed(() =>
        exec("podman", ["cp", `${container}:/tmp/data.bin`, join(copies, "data.bin")])
      );
      if (cp.code !== 0) throw new Error(`podman cp failed: ${cp.stderr}`);
      sizes = new Set([...sizes, readSize, getSize, readFileSync(join(copies, "data.bin")).length]);
      if (i < counts.warmup) continue;
      t.run.push(runMs);
      t.read.push(readMs);
      t.get.push(getMs);
      t.plain.push(plainMs);
      t.cp.push(cpMs);
    }
    if (sizes.size !== 1 || !sizes.has(counts.bytes)) throw new Error(`sizes differ: ${[...sizes]}`);
    await transport.terminateSession().catch(() => {});

    // The same over stdio, where the TypeScript SDK's client takes the 13.3 MB blob line by line.
    const stdio = await startServe({
      home,
      env: { CODEMODE_RUNTIME: "podman", CODEMODE_TIMEOUT: "60" },
      maxBufferSize: 64 * 2 ** 20, // the SDK's default, 10 MiB, is less than a 10 MB file's base64
    });
    const stdioReads: number[] = [];
    try {
      const viaStdio = session(stdio.client);
      await viaStdio.run(PREPARE);
      for (let i = 0; i < counts.stdioReads; i++) {
        const uri = await viaStdio.run(writeTo("/workspace/artifacts/data.bin"));
        stdioReads.push((await timed(() => viaStdio.read(uri!)))[0]);
      }
    } finally {
      await stdio.close();
    }

    const p50 = (values: number[]) => percentile(values, 0.5);
    const sum = t.run.map((ms, i) => ms + t.read[i]);
    const own = t.run.map((ms, i) => ms - t.plain[i]);
    const cp = { label: "podman cp of the same file", value: p50(t.cp) };
    const n = `${counts.runs} runs`;
    result.rows.push(
      row({
        section: "artifacts",
        metric: `10 MB artifact, write in the sandbox to resources/read done (HTTP), p50, ${n}`,
        value: p50(sum),
        unit: "ms",
        baseline: { label: "same run writing /tmp, no artifact", value: p50(t.plain) },
        note: `p95 ${percentile(sum, 0.95).toFixed(0)} ms`,
      }),
      row({
        section: "artifacts",
        metric: "sandbox to host store: the run with the artifact minus the run without, p50",
        value: p50(own),
        unit: "ms",
        baseline: cp,
        note: `${(counts.bytes / 1e6 / (p50(own) / 1000)).toFixed(0)} MB/s`,
      }),
      row({
        section: "artifacts",
        metric: "resources/read over Streamable HTTP (13.3 MB of base64), p50",
        value: p50(t.read),
        unit: "ms",
        baseline: cp,
      }),
      row({
        section: "artifacts",
        metric: "GET /artifacts/<session>/<path> under serve --http, p50",
        value: p50(t.get),
        unit: "ms",
        baseline: cp,
      }),
      row({
        section: "artifacts",
        metric: `resources/read over stdio, TypeScript SDK client, p50 of ${counts.stdioReads}`,
        value: p50(stdioReads),
        unit: "ms",
        baseline: { label: "resources/read over HTTP", value: p50(t.read) },
        note: "the SDK's stdio ReadBuffer concatenates and rescans per chunk: quadratic in message size",
      }),
    );
    result.notes.push(
      "every file read back had exactly 10,000,000 bytes; each run wrote a changed file (a rotated random " +
        "buffer made before timing)",
    );
  } finally {
    await client.close().catch(() => {});
    await http.stop();
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
    removeHome(home);
    rmSync(copies, { recursive: true, force: true });
  }
  return result;
}
