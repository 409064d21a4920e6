/**
 * A fleet for real: three `codemode serve --http` nodes, each on a host of its own (a network namespace)
 * with its own podman sandboxes, behind Debian's HAProxy and nginx running the shipped configurations
 * (deploy/haproxy/codemode.cfg, deploy/nginx/codemode.conf, rendered by scripts/fleet.sh), driven by the
 * real SDK client through each balancer: sessions pinned by the node prefix of their id, a node killed
 * (its sessions get 404 and clients start over on live nodes; its restart reaps its leftovers), a node
 * drained (its runs finish and its sessions are served while new ones go elsewhere; it exits 0 leaving no
 * container; a second signal ends the drain at once), and two nodes saving skills into one shared
 * directory at once.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { eventually } from "./_serve_http.ts";
import { netnsUsable } from "./_netns.ts";
import {
  type BalancerKind,
  connectFleet,
  containersOf,
  Fleet,
  type FleetClient,
  httpStatus,
  sandboxOwners,
} from "./_fleet.ts";

const runtime = podman();
const missing = [
  !netnsUsable() && "root with ip and nsenter (network namespaces)",
  !(await runtime.detect()).available && "podman",
  !(await runtime.imageExists(TEST_IMAGE)) && `the image ${TEST_IMAGE}`,
  !(await which("haproxy")) && "haproxy",
  !(await which("nginx")) && "nginx",
].filter(Boolean);
if (missing.length) {
  console.warn(`IGNORED fleet suite: missing ${missing.join(", ")} (scripts/setup.sh installs them)`);
}

const IDS = ["node-a", "node-b", "node-c"];
const BALANCERS: BalancerKind[] = ["haproxy", "nginx"];
let fleet: Fleet | undefined;
/** Why the fleet did not start: every test fails with it at once instead of starting it again. */
let broken: unknown;
const started = Date.now();
let lapStart = Date.now();
/** Prints how long the step that just ended took (the suite must stay within a few minutes). */
function lap(step: string): void {
  console.log(`  ${step}: ${((Date.now() - lapStart) / 1000).toFixed(1)} s`);
  lapStart = Date.now();
}

const test = (name: string, fn: (fleet: Fleet) => Promise<void>) =>
  Deno.test({
    name,
    ignore: missing.length > 0,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      if (broken) throw broken;
      if (!fleet) {
        fleet = await Fleet.start(IDS, BALANCERS).catch((error) => {
          throw (broken = error);
        });
        lap("fleet started");
      }
      lapStart = Date.now();
      const t0 = Date.now();
      try {
        await fn(fleet);
      } catch (error) {
        for (const kind of BALANCERS) {
          console.error(`--- ${kind}:\n${fleet.balancerOutput(kind).slice(-3000)}`);
        }
        throw error;
      } finally {
        console.log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      }
    },
  });

async function which(command: string): Promise<boolean> {
  const { spawnSync } = await import("node:child_process");
  return spawnSync("sh", ["-c", `command -v ${command}`]).status === 0;
}

/** `count` clients through `kind`, connected at once. */
function clients(kind: BalancerKind, count: number): Promise<FleetClient[]> {
  return Promise.all(Array.from({ length: count }, () => connectFleet(fleet!.url(kind))));
}

/** Clients through `kind` until one has a session on each of `nodes`; the others are ended. */
async function clientsOn(kind: BalancerKind, nodes: string[]): Promise<Map<string, FleetClient>> {
  const found = new Map<string, FleetClient>();
  // A node a busy machine made slow to answer its readiness check is out of rotation for a few seconds.
  const deadline = Date.now() + 30_000;
  while (found.size < nodes.length && Date.now() < deadline) {
    const client = await connectFleet(fleet!.url(kind));
    if (nodes.includes(client.node()) && !found.has(client.node())) found.set(client.node(), client);
    else await client.end();
    if (found.size < nodes.length) await new Promise((r) => setTimeout(r, 300));
  }
  assert.equal(
    found.size,
    nodes.length,
    `${kind} spread new sessions over ${[...found.keys()]}, not ${nodes}`,
  );
  return found;
}

/** 20 clients x 5 runs through `kind`, each keeping its own state in its own sandbox on its own node. */
async function twentyClients(kind: BalancerKind): Promise<void> {
  const all = await clients(kind, 20);
  try {
    lap(`${kind}: 20 clients connected`);
    const perNode = new Map<string, number>();
    for (const c of all) perNode.set(c.node(), (perNode.get(c.node()) ?? 0) + 1);
    assert.deepEqual([...perNode.keys()].sort(), IDS, `new sessions went to every node: ${[...perNode]}`);
    const seen = await Promise.all(all.map(async (c, i) => {
      const sandboxes = new Set<string>();
      sandboxes.add(await c.run(`import socket\nx = ${i * 1000}\nsocket.gethostname()`));
      for (let k = 1; k <= 4; k++) {
        const [x, sandbox] = (await c.run(`x += 1\nf"{x} {socket.gethostname()}"`)).split(" ");
        assert.equal(Number(x), i * 1000 + k, `client ${i} run ${k + 1} kept its own state`);
        sandboxes.add(sandbox);
      }
      assert.equal(sandboxes.size, 1, `client ${i}: every run answered by one sandbox`);
      return [...sandboxes][0];
    }));
    lap(`${kind}: 5 runs each`);
    assert.equal(new Set(seen).size, 20, `${kind}: no two clients shared a sandbox`);
    // Each session's sandbox is a container of the node its id names, labelled with that session.
    const owners = await sandboxOwners();
    for (const c of all) {
      assert.deepEqual(
        owners.get(c.sessionId()),
        [fleet!.node(c.node()).serve!.pid],
        `session ${c.sessionId()}`,
      );
    }
  } finally {
    await Promise.all(all.map((c) => c.end()));
    lap(`${kind}: sessions ended`);
  }
}

// One balancer after the other: 40 sandboxes starting at once overload a busy 2-core machine.
test("HAProxy, then nginx, 20 clients x 5 runs through each: every client keeps its state, each in its own sandbox on its session's node", async () => {
  for (const kind of BALANCERS) await twentyClients(kind);
});

test("kill -9 a node: its sessions get 404 through both balancers, clients start over on live nodes, the others are untouched, its restart reaps its leftovers", async (fleet) => {
  const victim = fleet.node("node-c");
  const through = new Map<BalancerKind, Map<string, FleetClient>>();
  for (const kind of BALANCERS) through.set(kind, await clientsOn(kind, IDS));
  const everyone = [...through.values()].flatMap((m) => [...m.values()]);
  try {
    await Promise.all(everyone.map((c, i) => c.run(`x = ${i}`)));
    lap("clients on every node");
    // A run that holds the sandbox's interpreter in C code: its container outlives the node's death.
    const busy = through.get("haproxy")!.get("node-c")!;
    // The SDK waits for the answer of a request whose stream broke until its own timeout: short here.
    const stuck = busy.run("sum(range(10**13))", 100, 10_000).then(() => "finished", (e) => e);
    await new Promise((r) => setTimeout(r, 1500));
    const deadPid = victim.serve!.pid;
    await victim.serve!.stop("SIGKILL");
    lap("killed");
    const left = await containersOf(deadPid);
    assert.ok(left.length >= 1, "the busy sandbox outlived its node");

    for (const [i, c] of everyone.entries()) {
      if (c.node() === "node-c") {
        const error = await c.run("x").then(() => undefined, (e) => e);
        assert.equal(
          httpStatus(error),
          404,
          `a session of the dead node gets 404, not the balancer's error: ${error}`,
        );
      } else {
        assert.equal(await c.run("x"), String(i), "a session of a live node is untouched");
      }
    }
    lap("404s and untouched sessions");
    // As an MCP client does on 404: a new session, which lands on a live node and carries on.
    for (const kind of BALANCERS) {
      const again = await connectFleet(fleet.url(kind));
      everyone.push(again);
      assert.notEqual(again.node(), "node-c");
      assert.equal(await again.run("x = 41\nx + 1"), "42");
    }

    lap("new sessions");
    await fleet.startNode("node-c");
    lap("restarted");
    assert.ok(await eventually(async () => (await containersOf(deadPid)).length === 0, 30_000), "reaped");
    assert.notEqual(await stuck, "finished");
  } finally {
    await Promise.all(everyone.map((c) => c.end()));
  }
});

test("drain: SIGTERM a node during a 5 s run: the run completes, its sessions are served, new sessions go elsewhere, it exits 0 leaving no container", async (fleet) => {
  const node = fleet.node("node-b");
  const pid = node.serve!.pid;
  const onB = new Map<BalancerKind, FleetClient>();
  const others: FleetClient[] = [];
  for (const kind of BALANCERS) onB.set(kind, (await clientsOn(kind, ["node-b"])).get("node-b")!);
  const long = (await clientsOn("haproxy", ["node-b"])).get("node-b")!;
  try {
    for (const c of onB.values()) await c.run("x = 'kept'");
    const run = long.run("import time\ntime.sleep(5)\n'slept'", 30);
    await new Promise((r) => setTimeout(r, 1000));
    const t0 = Date.now();
    const exited = node.serve!.stop("SIGTERM");

    for (const [kind, c] of onB) {
      assert.equal(await c.run("x"), "kept", `${kind}: a draining node's session is served`);
    }
    for (const kind of BALANCERS) {
      for (let i = 0; i < 3; i++) {
        const fresh = await connectFleet(fleet.url(kind));
        others.push(fresh);
        assert.notEqual(fresh.node(), "node-b", `${kind}: a new session goes to another node`);
      }
    }
    assert.equal(await run, "slept", "the run in flight completed");
    assert.equal(await exited, 0);
    console.log(`  drained and exited ${((Date.now() - t0) / 1000).toFixed(1)} s after SIGTERM`);
    assert.deepEqual(await containersOf(pid), [], "no container left");
    for (const c of onB.values()) {
      const error = await c.run("x").then(() => undefined, (e) => e);
      assert.equal(httpStatus(error), 404, "once it is gone, its sessions get 404");
    }
  } finally {
    await Promise.all([...onB.values(), long, ...others].map((c) => c.end()));
  }
});

test("two nodes save 20 skills each into one shared directory at once: all 40 there, each intact, each node loads the other's", async (fleet) => {
  const on = await clientsOn("haproxy", ["node-a", "node-c"]);
  try {
    const save = (node: string) =>
      on.get(node)!.run(
        `from mcp import runtime\nfor i in range(20):\n    await runtime.save_skill(f"${node}-skill-{i}", ` +
          `f"def value():\\n    return '${node} {i}'\\n", f"Skill {i} of ${node}")\n"saved"`,
      );
    assert.deepEqual(await Promise.all([save("node-a"), save("node-c")]), ["saved", "saved"]);
    const folders = readdirSync(fleet.skills).sort();
    assert.equal(
      folders.length,
      40,
      `no temporary or lost folder: ${folders.filter((f) => f.startsWith("."))}`,
    );
    for (const node of ["node-a", "node-c"]) {
      for (let i = 0; i < 20; i++) {
        const code = readFileSync(join(fleet.skills, `${node}-skill-${i}`, "skill.py"), "utf8");
        assert.equal(code, `def value():\n    return '${node} ${i}'\n`);
      }
    }
    assert.equal(
      await on.get("node-a")!.run("from skills import node_c_skill_7\nnode_c_skill_7.value()"),
      "node-c 7",
    );
  } finally {
    await Promise.all([...on.values()].map((c) => c.end()));
  }
});

test("a second SIGTERM during a drain ends it at once, still removing every sandbox", async (fleet) => {
  const node = fleet.node("node-c");
  const pid = node.serve!.pid;
  const client = (await clientsOn("haproxy", ["node-c"])).get("node-c")!;
  const run = client.run("import time\ntime.sleep(60)", 90).catch((e) => e);
  try {
    await new Promise((r) => setTimeout(r, 1500));
    const t0 = Date.now();
    const exited = node.serve!.stop("SIGTERM");
    await new Promise((r) => setTimeout(r, 1000));
    process.kill(pid, "SIGTERM");
    assert.equal(await exited, 0);
    const seconds = (Date.now() - t0) / 1000;
    assert.ok(seconds < 15, `stopped ${seconds} s after the first signal, not after the 60 s run`);
    assert.deepEqual(await containersOf(pid), [], "no container left");
  } finally {
    await client.end();
    await run; // ended with the client: its stream was cut, and the SDK would wait for its own timeout
  }
});

test("the fleet stops leaving no container", async (fleet) => {
  const pids = [...fleet.nodes.values()].map((n) => n.serve!.pid);
  await fleet.close();
  for (const pid of pids) assert.deepEqual(await containersOf(pid), []);
  console.log(`  fleet suite: ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
});
