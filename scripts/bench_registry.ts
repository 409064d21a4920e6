/**
 * Section "registry" (issue 28): what finding and adding servers costs. A serve from source on podman
 * asks the test registry (tests/integration/_registry.ts, on loopback); its client approves every add the
 * moment it is asked. Figures, each against a baseline taken in the same run:
 * - `find_servers` from the sandbox, p50, with a new query each time (the registry is asked) and with one
 *   query again (the host's cache answers), against `search_tool_docs` (a host call without a registry)
 *   and a plain HTTP request to the registry from the bench process;
 * - `add_server` → the first tool call returned, for server-memory from npm's cache (npx), against
 *   starting the same `npx -y` command by hand and getting its initialize answer.
 * @module
 */
import { Client } from "@modelcontextprotocol/client";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startRegistry } from "../tests/integration/_registry.ts";
import {
  exec,
  fakeHome,
  IMAGE,
  percentile,
  removeHome,
  removeLeftovers,
  row,
  type SectionResult,
  startServe,
  works,
} from "./bench_harness.ts";

/** How many of each. */
export const counts = { finds: 200, adds: 5, spawns: 5 };

const PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31";
const MEMORY = "io.github.modelcontextprotocol/server-memory";

/** Sandbox code timing `n` calls of `call` (a Python expression with `i`), printing the durations in ms. */
const TIMED = (n: number, call: string) => `
import json, time
from mcp import runtime
ms = []
for i in range(${n}):
    t = time.perf_counter()
    await ${call}
    ms.append((time.perf_counter() - t) * 1000)
print(json.dumps(ms))
`;

/** Sandbox code: add, call once, remove; prints the add → first result time in ms. */
const ADD = (i: number) => `
import time
from mcp import runtime
t = time.perf_counter()
await runtime.add_server(${JSON.stringify(MEMORY)}, alias="bench${i}")
await mcp_bench${i}.read_graph()
print((time.perf_counter() - t) * 1000)
_ = await runtime.remove_server("bench${i}")
`;

/** Runs the registry section. */
export async function benchRegistry(): Promise<SectionResult> {
  const result: SectionResult = { name: "registry", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  const registry = await startRegistry();
  const home = fakeHome();
  const cache = (await exec("npm", ["config", "get", "cache"])).stdout.trim();
  writeFileSync(join(home, ".npmrc"), `cache=${cache}\n`);
  const client = new Client({ name: "codemode-bench", version: "1" }, {
    capabilities: { elicitation: { form: {} } },
  });
  client.setRequestHandler("elicitation/create", () => ({
    action: "accept" as const,
    content: { approve: true, scope: "session" },
  }));
  try {
    const served = await startServe({
      home,
      client,
      env: {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_REGISTRY_URL: registry.url,
        CODEMODE_ADD_SERVERS: "ask",
        CODEMODE_TIMEOUT: "120",
        CODEMODE_LOG_LEVEL: "warn",
      },
    });
    const lastLine = (r: { structured: Record<string, unknown> }) =>
      String(r.structured.stdout ?? "").trim().split("\n").at(-1)!;
    try {
      await served.run(TIMED(20, 'runtime.find_servers(f"warm{i}")'));
      const fresh = JSON.parse(
        lastLine(await served.run(TIMED(counts.finds, 'runtime.find_servers(f"memory{i}")'))),
      );
      const cached = JSON.parse(
        lastLine(await served.run(TIMED(counts.finds, 'runtime.find_servers("memory")'))),
      );
      const search = JSON.parse(
        lastLine(await served.run(TIMED(counts.finds, 'runtime.search_tool_docs(f"read file {i}")'))),
      );
      const http: number[] = [];
      for (let i = 0; i < counts.finds; i++) {
        const t = performance.now();
        await (await fetch(`${registry.url}/v0.1/servers?search=http${i}&version=latest&limit=100`))
          .arrayBuffer();
        http.push(performance.now() - t);
      }
      const adds: number[] = [];
      for (let i = 0; i < counts.adds; i++) adds.push(Number(lastLine(await served.run(ADD(i)))));
      const spawns: number[] = [];
      for (let i = 0; i < counts.spawns; i++) spawns.push(await npxInitialize(home));
      const p50 = (xs: number[]) => percentile(xs, 0.5);
      const p95 = (xs: number[]) => `p95 ${percentile(xs, 0.95).toFixed(2)} ms`;
      const searchBase = { label: "search_tool_docs from the sandbox, p50", value: p50(search) };
      result.rows.push(
        row({
          section: "registry",
          metric: "find_servers, the registry asked (a new query each time), p50",
          value: p50(fresh),
          unit: "ms",
          baseline: searchBase,
          note: `${counts.finds} calls; ${p95(fresh)}; a plain HTTP request to the registry: p50 ` +
            `${p50(http).toFixed(2)} ms`,
        }),
        row({
          section: "registry",
          metric: "find_servers, answered from the host's cache, p50",
          value: p50(cached),
          unit: "ms",
          baseline: searchBase,
          note: `${counts.finds} calls; ${p95(cached)}`,
        }),
        row({
          section: "registry",
          metric: "add_server → first tool call returned (server-memory from npm's cache), median",
          value: p50(adds),
          unit: "ms",
          baseline: { label: `npx -y ${PACKAGE} → initialize answered, by hand, median`, value: p50(spawns) },
          note: `${counts.adds} adds (${adds.map((ms) => Math.round(ms)).join(", ")} ms), each removed after`,
        }),
      );
      result.notes.push(
        "serve from source on podman, the test registry on loopback (tests/testdata/registry plus a 5 MB entry); " +
          "the client approves each add the moment it is asked, so no person's time is in the figures",
      );
    } finally {
      await served.close();
    }
  } finally {
    await registry.close();
    removeHome(home);
    const left = await removeLeftovers();
    if (left.length) result.notes.push(`removed leftover containers: ${left.join(", ")}`);
  }
  return result;
}

/** Starts `npx -y <package>` in `home` and times spawn → the initialize answer on stdout, in ms. */
function npxInitialize(home: string): Promise<number> {
  const started = performance.now();
  const child = spawn("npx", ["-y", PACKAGE], {
    cwd: home,
    env: { PATH: process.env.PATH ?? "", HOME: home },
    stdio: ["pipe", "pipe", "ignore"],
    detached: true, // its own process group: npx and the server it starts end together
  });
  const init = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "bench", version: "1" },
    },
  };
  child.stdin.write(JSON.stringify(init) + "\n");
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes('"id":1')) {
        resolve(performance.now() - started);
        process.kill(-child.pid!, "SIGTERM");
      }
    });
    child.once("exit", () => reject(new Error(`npx ended before answering: ${out.slice(0, 300)}`)));
  });
}
