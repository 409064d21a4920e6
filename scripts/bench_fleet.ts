/**
 * Section "fleet" (issue 25): `codemode serve --http` nodes (from source, podman) on loopback ports behind
 * Debian's HAProxy with the shipped configuration (rendered by scripts/fleet.sh). The extra hop: warm run
 * p50 and p95 through HAProxy against straight to a node, interleaved in the same run; `initialize` to
 * the first answer both ways; runs per second with 1, 2 and 3 nodes and the CPU each run costs; and how
 * long a node takes to drain under load (SIGTERM to exit) while clients keep running.
 * @module
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exec, IMAGE, percentile, ROOT, row, type SectionResult, sleep, works } from "./bench_harness.ts";
import { connect, type HttpServe, type LoadClient, startHttpServe } from "./bench_load.ts";

/** Counts of the fleet section. */
export const counts = { hopRuns: 200, starts: 5, clients: 12, slices: 4, sliceSeconds: 3, drainClients: 9 };

/** The run every throughput and latency figure uses: host and sandbox round trip, a little Python. */
const WARM_RUN = "sum(range(1000))";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** HAProxy in front of `nodes` with the shipped configuration; resolves once it accepts connections. */
async function haproxy(nodes: { id: string; url: string }[], dir: string) {
  const port = await freePort();
  const pairs = nodes.map((n) => `${n.id}=${new URL(n.url).host}`);
  const child = spawn(
    "bash",
    [
      join(ROOT, "scripts/fleet.sh"),
      "balancer",
      "haproxy",
      "--dir",
      dir,
      "--listen",
      `127.0.0.1:${port}`,
      ...pairs,
    ],
    { stdio: "ignore" },
  );
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = new Socket().once("connect", () => (socket.destroy(), resolve(true)))
        .once("error", () => resolve(false));
      socket.connect(port, "127.0.0.1");
    });
    if (up) break;
    await sleep(100);
  }
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    pid: child.pid!,
    stop: () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM"))),
  };
}

/** User plus system CPU seconds of process `pid` so far (0 once it is gone). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return 0;
  }
}

/** Busy CPU seconds of the whole machine so far (every process: nodes, sandboxes, HAProxy, clients). */
function machineBusySeconds(): number {
  const [, ...ticks] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
  const idle = ticks[3] + ticks[4];
  return (ticks.reduce((a, b) => a + b, 0) - idle) / 100;
}

/** Runs `code` on each client in a loop for `seconds`; returns how many runs answered. */
async function runFor(clients: LoadClient[], seconds: number): Promise<number> {
  const until = Date.now() + seconds * 1000;
  const done = await Promise.all(clients.map(async (client) => {
    let n = 0;
    while (Date.now() < until) {
      await client.run(WARM_RUN);
      n++;
    }
    return n;
  }));
  return done.reduce((a, b) => a + b, 0);
}

/** Connects `n` clients to `url` and runs once on each (their sandboxes start). */
function warmClients(url: string, n: number): Promise<LoadClient[]> {
  return Promise.all(Array.from({ length: n }, async () => {
    const client = await connect(url);
    await client.run(WARM_RUN);
    return client;
  }));
}

/** Runs the fleet section. */
export async function benchFleet(): Promise<SectionResult> {
  const result: SectionResult = { name: "fleet", rows: [], notes: [] };
  if (!(await works("podman", ["image", "exists", IMAGE]))) {
    result.skipped = `podman or the image "${IMAGE}" is missing (build it: codemode image build)`;
    return result;
  }
  if (!(await works("haproxy", ["-v"]))) {
    result.skipped = "haproxy is not installed (scripts/setup.sh installs it)";
    return result;
  }
  const dir = mkdtempSync(join(tmpdir(), "codemode-bench-fleet-"));
  const ids = ["node-1", "node-2", "node-3"];
  const nodes: (HttpServe & { id: string })[] = [];
  const balancers: { stop(): Promise<void> }[] = [];
  const clients: LoadClient[] = [];
  try {
    for (const id of ids) {
      const home = mkdtempSync(join(dir, `${id}-`));
      nodes.push({
        id,
        ...await startHttpServe(home, { CODEMODE_NODE_ID: id, CODEMODE_MAX_SESSIONS: "64" }),
      });
    }
    const all = await haproxy(nodes, join(dir, "haproxy-3"));
    balancers.push(all);

    // The extra hop: two warm sessions, one straight to node-1, one through HAProxy, interleaved.
    const direct = await connect(nodes[0].url);
    const proxied = await connect(all.url);
    clients.push(direct, proxied);
    await direct.run(WARM_RUN);
    await proxied.run(WARM_RUN);
    const times = { direct: [] as number[], proxied: [] as number[] };
    for (let i = 0; i < counts.hopRuns + 10; i++) {
      for (const [name, client] of [["direct", direct], ["proxied", proxied]] as const) {
        const start = performance.now();
        await client.run(WARM_RUN);
        if (i >= 10) times[name].push(performance.now() - start);
      }
    }
    const hop = `warm run (${WARM_RUN}), ${counts.hopRuns} each, interleaved`;
    for (const p of [0.5, 0.95]) {
      result.rows.push(row({
        section: "fleet",
        metric: `${hop}: p${p * 100} through HAProxy`,
        value: percentile(times.proxied, p),
        unit: "ms",
        baseline: { label: `straight to a node, p${p * 100}`, value: percentile(times.direct, p) },
        goal: { on: "ratio", op: "≤", limit: 1.2 },
      }));
    }

    // initialize to the first answer: a new session, its sandbox started by its first run.
    const firstAnswer = async (url: string) => {
      const start = performance.now();
      const client = await connect(url);
      await client.run("1");
      const ms = performance.now() - start;
      await client.end();
      return ms;
    };
    const starts = { direct: [] as number[], proxied: [] as number[] };
    for (let i = 0; i < counts.starts; i++) {
      starts.direct.push(await firstAnswer(nodes[0].url));
      starts.proxied.push(await firstAnswer(all.url));
    }
    result.rows.push(row({
      section: "fleet",
      metric:
        `initialize to first answer (new session, sandbox start), median of ${counts.starts}, through HAProxy`,
      value: percentile(starts.proxied, 0.5),
      unit: "ms",
      baseline: { label: "straight to a node", value: percentile(starts.direct, 0.5) },
    }));
    await Promise.all([direct.end(), proxied.end()]);
    clients.length = 0;

    // Throughput with 1, 2 and 3 nodes behind HAProxy, the same clients' load each time, in short slices
    // taken in turn: the machine's other load drifts, and must not favour one configuration.
    const setups = [];
    for (const n of [1, 2, 3]) {
      const front = n === 3 ? all : await haproxy(nodes.slice(0, n), join(dir, `haproxy-${n}`));
      if (n < 3) balancers.push(front);
      const load = await warmClients(front.url, counts.clients);
      clients.push(...load);
      setups.push({ n, load, runs: 0, seconds: 0, nodeCpu: 0, machineCpu: 0 });
    }
    for (let slice = 0; slice < counts.slices; slice++) {
      for (const setup of setups) {
        const cpu0 = nodes.map((node) => cpuSeconds(node.pid));
        const machine0 = machineBusySeconds();
        const start = performance.now();
        setup.runs += await runFor(setup.load, counts.sliceSeconds);
        setup.seconds += (performance.now() - start) / 1000;
        setup.nodeCpu += nodes.reduce((sum, node, i) => sum + cpuSeconds(node.pid) - cpu0[i], 0);
        setup.machineCpu += machineBusySeconds() - machine0;
      }
    }
    const oneNode = setups[0].runs / setups[0].seconds;
    for (const { n, runs, seconds, nodeCpu, machineCpu } of setups) {
      result.rows.push(row({
        section: "fleet",
        metric: `runs/s, ${counts.clients} clients through HAProxy, ${n} node${n > 1 ? "s" : ""}`,
        value: runs / seconds,
        unit: "runs/s",
        ...(n > 1 ? { baseline: { label: "1 node", value: oneNode } } : {}),
        note:
          `CPU per run: nodes ${(nodeCpu / runs * 1000).toFixed(1)} ms, whole machine ${
            (machineCpu / runs * 1000).toFixed(1)
          } ms (sandboxes, HAProxy, clients and other load included); ${counts.slices} slices of ` +
          `${counts.sliceSeconds} s taken in turn with the other node counts`,
      }));
    }
    await Promise.all(clients.map((c) => c.end()));
    clients.length = 0;

    // Drain under load: clients keep running on every node; one node gets SIGTERM.
    const load = await warmClients(all.url, counts.drainClients);
    clients.push(...load);
    const victim = nodes[1];
    const onVictim = load.filter((_, i) => i % 3 === 1).length;
    let restarted = 0;
    let stop = false;
    // As an MCP client does: a run answered 404 (its session ended with the drain) starts a new session.
    const busy = Promise.all(load.map(async (first) => {
      let client = first;
      while (!stop) {
        const failed = await client.run("import time\ntime.sleep(0.5)").then(() => false, () => true);
        if (failed && !stop) {
          restarted++;
          client = await connect(all.url);
          clients.push(client);
        }
      }
    }));
    await sleep(1000);
    const start = performance.now();
    await victim.stop();
    const drained = performance.now() - start;
    stop = true;
    await busy;
    result.rows.push(row({
      section: "fleet",
      metric: `drain under load: SIGTERM to exit, ${counts.drainClients} clients running 0.5 s runs`,
      value: drained,
      unit: "ms",
      note: `about ${onVictim} sessions on the drained node; ${restarted} clients got 404 once their ` +
        "session ended and started a new one on another node",
    }));
    result.notes.push(
      "nodes, HAProxy and clients share this 2-core machine: more nodes add no CPU, so runs/s cannot scale " +
        "here; the figures show what the hop and each node cost",
    );
  } finally {
    await Promise.allSettled(clients.map((c) => c.end()));
    await Promise.allSettled(balancers.map((b) => b.stop()));
    await Promise.allSettled(nodes.map((n) => n.stop()));
    for (const node of nodes) {
      const left = (await exec("podman", ["ps", "-aq", "--filter", `label=codemode.owner-pid=${node.pid}`]))
        .stdout
        .split("\n").filter(Boolean);
      if (left.length) await exec("podman", ["rm", "-f", "-t", "0", ...left]);
    }
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}
