/**
 * A fleet for the tests: real `codemode serve --http` nodes with podman sandboxes, each on a host of its
 * own (a network namespace, see _netns.ts), behind Debian's HAProxy and nginx running the shipped
 * configurations as scripts/fleet.sh renders them, reached by the real SDK client through a balancer.
 * Everything is stopped and removed by `close()`, when the worker unloads, or on SIGINT/SIGTERM.
 * @module
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { type Host, type Hosts, makeHosts } from "./_netns.ts";
import { eventually, type HttpServe, startHttpServe } from "./_serve_http.ts";
import { ROOT } from "./_serve.ts";

/** The bearer token every node requires (they listen on non-loopback addresses). */
export const FLEET_TOKEN = "fleet-token-3b9e07c1d2";
/** The port every node listens on, each in its own namespace. */
export const NODE_PORT = 8765;
/** The balancers the fleet runs. */
export type BalancerKind = "haproxy" | "nginx";

/** One node: its id, its host, and its serve while it runs. */
export interface FleetNode {
  id: string;
  host: Host;
  home: string;
  serve?: HttpServe;
}

interface Balancer {
  kind: BalancerKind;
  url: string;
  child: ChildProcess;
  output(): string;
}

/** A free TCP port on 127.0.0.1 (free when asked; the balancer binds it right after). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts connections on `port`, or rejects after `ms`. */
async function accepting(port: number, ms: number, why: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = new Socket();
      socket.once("connect", () => (socket.destroy(), resolve(true)));
      socket.once("error", () => resolve(false));
      socket.connect(port, "127.0.0.1");
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${ms} ms: ${why()}`);
}

/** Nodes on hosts of their own behind HAProxy and nginx. */
export class Fleet {
  readonly nodes = new Map<string, FleetNode>();
  readonly balancers = new Map<BalancerKind, Balancer>();
  /** The skills directory every node saves to (a network volume, in a real fleet). */
  readonly skills: string;
  readonly #hosts: Hosts;
  readonly #dir: string;
  readonly #env: Record<string, string>;
  #closing?: Promise<void>;
  #onSignal = () => void this.close().finally(() => Deno.exit(130));

  private constructor(ids: string[], env: Record<string, string>) {
    this.#dir = mkdtempSync(join(tmpdir(), "codemode-fleet-"));
    this.skills = join(this.#dir, "skills");
    mkdirSync(this.skills);
    this.#env = env;
    this.#hosts = makeHosts(ids.length);
    ids.forEach((id, i) => {
      const home = join(this.#dir, id);
      mkdirSync(home);
      this.nodes.set(id, { id, host: this.#hosts.hosts[i], home });
    });
    Deno.addSignalListener("SIGINT", this.#onSignal);
    Deno.addSignalListener("SIGTERM", this.#onSignal);
    globalThis.addEventListener("unload", () => this.#killAll());
  }

  /** Starts a node per id (in parallel), then each balancer in front of them. */
  static async start(
    ids: string[],
    balancers: BalancerKind[],
    env: Record<string, string> = {},
  ): Promise<Fleet> {
    const fleet = new Fleet(ids, env);
    try {
      await Promise.all(ids.map((id) => fleet.startNode(id)));
      await Promise.all(ids.map((id) => fleet.#runtimeChosen(id)));
      for (const kind of balancers) await fleet.#startBalancer(kind);
      return fleet;
    } catch (error) {
      await fleet.close();
      throw error;
    }
  }

  /** The node `id`. */
  node(id: string): FleetNode {
    const node = this.nodes.get(id);
    if (!node) throw new Error(`no node "${id}"`);
    return node;
  }

  /** Starts (or restarts) node `id` on its host; resolves once it serves. */
  async startNode(id: string): Promise<HttpServe> {
    const node = this.node(id);
    node.serve = await startHttpServe(
      node.home,
      {
        CODEMODE_RUNTIME: "podman",
        CODEMODE_NODE_ID: id,
        CODEMODE_HTTP_TOKEN: FLEET_TOKEN,
        CODEMODE_SKILLS_DIR: this.skills,
        CODEMODE_TIMEOUT: "60",
        ...this.#env,
      },
      ["--host", node.host.address, "--port", String(NODE_PORT)],
      node.host.enter,
    );
    return node.serve;
  }

  /**
   * Waits until node `id` has chosen its runtime (it starts detecting at once; /healthz names it). On a
   * loaded machine the detection can time out; a run makes the node detect again.
   */
  async #runtimeChosen(id: string): Promise<void> {
    const health = new URL("/healthz", this.node(id).serve!.url);
    const chosen = async () => {
      const body = await fetch(health).then((r) => r.json(), () => ({}));
      return body.runtime === "podman";
    };
    if (await eventually(chosen, 30_000)) return;
    const client = await connectFleet(this.node(id).serve!.url);
    try {
      for (let attempt = 1;; attempt++) {
        try {
          await client.run("1");
          return;
        } catch (error) {
          if (attempt === 5) {
            throw new Error(
              `node ${id} cannot run code: ${error}\n${this.node(id).serve!.stderr().slice(-3000)}`,
            );
          }
        }
      }
    } finally {
      await client.end();
    }
  }

  /** The MCP URL of balancer `kind`. */
  url(kind: BalancerKind): string {
    const balancer = this.balancers.get(kind);
    if (!balancer) throw new Error(`no ${kind} in this fleet`);
    return balancer.url;
  }

  /** What balancer `kind` printed so far (its errors, nginx's notices). */
  balancerOutput(kind: BalancerKind): string {
    return this.balancers.get(kind)?.output() ?? "";
  }

  async #startBalancer(kind: BalancerKind): Promise<void> {
    const port = await freePort();
    const dir = join(this.#dir, kind);
    const pairs = [...this.nodes.values()].map((n) => `${n.id}=${n.host.address}:${NODE_PORT}`);
    // fleet.sh execs the balancer: its pid is the balancer's.
    const child = spawn(
      "bash",
      [
        join(ROOT, "scripts/fleet.sh"),
        "balancer",
        kind,
        "--dir",
        dir,
        "--listen",
        `127.0.0.1:${port}`,
        ...pairs,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    const balancer = { kind, url: `http://127.0.0.1:${port}/mcp`, child, output: () => output };
    this.balancers.set(kind, balancer);
    await accepting(port, 15_000, () => output.slice(-2000));
  }

  /** Stops the balancers and the nodes (SIGINT: at once, sandboxes removed), then removes the hosts. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      Deno.removeSignalListener("SIGINT", this.#onSignal);
      Deno.removeSignalListener("SIGTERM", this.#onSignal);
      for (const balancer of this.balancers.values()) {
        if (balancer.child.exitCode === null) balancer.child.kill("SIGTERM");
      }
      await Promise.all([...this.nodes.values()].map((n) => n.serve?.stop("SIGINT")));
      this.#hosts.remove();
      rmSync(this.#dir, { recursive: true, force: true });
    })();
    return this.#closing;
  }

  /** Last resort when the worker unloads without close(): nothing may outlive it. */
  #killAll(): void {
    for (const balancer of this.balancers.values()) balancer.child.kill("SIGKILL");
    for (const node of this.nodes.values()) {
      if (node.serve?.child.exitCode === null) node.serve.child.kill("SIGINT");
    }
    this.#hosts.remove();
  }
}

/** An SDK client through a balancer, with the fleet's token; knows which node its session is on. */
export interface FleetClient {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The node its session id names. */
  node(): string;
  sessionId(): string;
  /**
   * The value of a run_python call: its last expression's repr (a str's quotes taken off); `timeout` is
   * the run's, `wait` how long the client waits for the answer (ms).
   */
  run(code: string, timeout?: number, wait?: number): Promise<string>;
  /** Ends the session (DELETE) and the client. */
  end(): Promise<void>;
}

/** Connects a new session through the balancer at `url`. */
export async function connectFleet(url: string): Promise<FleetClient> {
  const client = new Client({ name: "codemode-fleet-tests", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${FLEET_TOKEN}` } },
  });
  await client.connect(transport);
  const sessionId = () => transport.sessionId ?? "";
  return {
    client,
    transport,
    sessionId,
    node: () => sessionId().split(".")[0],
    async run(code, timeout, wait = 180_000) {
      const result = await client.callTool(
        { name: "run_python", arguments: { code, ...(timeout ? { timeout } : {}) } },
        { timeout: wait },
      );
      if (result.isError) throw new Error(`run failed: ${JSON.stringify(result.content).slice(0, 500)}`);
      const value = String((result.structuredContent as { value?: unknown })?.value ?? "");
      return /^'.*'$/s.test(value) ? value.slice(1, -1) : value;
    },
    async end() {
      await transport.terminateSession().catch(() => {});
      await client.close().catch(() => {});
    },
  };
}

/** The HTTP status of an SDK error (404 for a session the node does not hold), if it has one. */
export function httpStatus(error: unknown): number | undefined {
  return (error as { status?: number })?.status;
}

/** Names of podman containers (running or not) started by the process `pid`. */
export function containersOf(pid: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(
      "podman",
      ["ps", "-a", "--filter", `label=codemode.owner-pid=${pid}`, "--format", "{{.Names}}"],
      (error, stdout) =>
        error ? reject(error) : resolve(stdout.split("\n").map((s) => s.trim()).filter(Boolean)),
    );
  });
}

/** The owner pids of the running sandbox containers, by their session label (one `podman ps`). */
export function sandboxOwners(): Promise<Map<string, number[]>> {
  return new Promise((resolve, reject) => {
    execFile(
      "podman",
      [
        "ps",
        "--filter",
        "label=codemode.managed=true",
        "--format",
        '{{index .Labels "codemode.session"}} {{index .Labels "codemode.owner-pid"}}',
      ],
      (error, stdout) => {
        if (error) return reject(error);
        const owners = new Map<string, number[]>();
        for (const line of stdout.split("\n").map((s) => s.trim()).filter(Boolean)) {
          const [session, owner] = line.split(" ");
          owners.set(session, [...owners.get(session) ?? [], Number(owner)]);
        }
        resolve(owners);
      },
    );
  });
}
