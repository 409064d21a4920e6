/**
 * What trace_serve_profile.ts and trace_serve_toggle.ts share: their options, the gather they time, a
 * serve from source under trace_serve_entry.ts (a checkout's), the collector, the main thread's CPU, and
 * the rounds of gathers (with print(1) runs between them, as the bench section makes) they measure.
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { type OtlpReceiver, startOtlpReceiver } from "../tests/integration/_otlp_receiver.ts";
import {
  DENO,
  fakeHome,
  referenceServers,
  removeHome,
  removeLeftovers,
  type Served,
  startServe,
} from "./bench_harness.ts";

const argv = process.argv.slice(2);
/** The value of `--name`, or `fallback`. */
export const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? argv[at + 1] : fallback;
};
/** Whether `--name` was given. */
export const flag = (name: string) => argv.includes(`--${name}`);

export const CALLS = 100;
export const GATHER = `import asyncio
r = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(${CALLS})])
len(r)`;

/** The CPU time of a process's main thread alone (its event loop), in ms, from schedstat's nanoseconds. */
export const mainThreadMs = (pid: number) =>
  Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;

/** A live receiver, and the endpoint the traced serves use: it, or with `down` a port nothing listens on. */
export async function collector(down: boolean): Promise<{ receiver: OtlpReceiver; endpoint: string }> {
  const receiver = await startOtlpReceiver();
  if (!down) return { receiver, endpoint: receiver.url };
  const dead = await startOtlpReceiver();
  await dead.close();
  return { receiver, endpoint: dead.url };
}

/** The serves of one measurement, each with a fake HOME and server-everything. */
export class TraceServes {
  readonly serves: Served[] = [];
  #homes: string[] = [];

  /** Starts `codemode serve` from `tree` (its trace_serve_entry.ts) with `env`, warm after a print(1). */
  async start(tree: string, env: Record<string, string>): Promise<Served> {
    const home = fakeHome((h) => ({ everything: referenceServers(h).everything }));
    this.#homes.push(home);
    const served = await startServe({
      home,
      command: [DENO, "run", "-A", "--quiet", join(tree, "scripts/trace_serve_entry.ts")],
      env: { CODEMODE_RUNTIME: "podman", ...env },
    });
    this.serves.push(served);
    await served.runtimeSelected(120_000).catch(() => {});
    await served.run("print(1)");
    return served;
  }

  /**
   * `gathers` gathers on every serve in turn, each after `prints` print(1) runs of every serve (not
   * measured); per serve its main-thread ms over its gathers, and their wall times.
   */
  async gathers(gathers: number, prints: number): Promise<{ cpu: number[]; walls: number[][] }> {
    const cpu = this.serves.map(() => 0);
    const walls = this.serves.map(() => [] as number[]);
    for (let n = 0; n < gathers; n++) {
      for (let p = 0; p < prints; p++) for (const served of this.serves) await served.run("print(1)");
      for (const [i, served] of this.serves.entries()) {
        const [start, main] = [performance.now(), mainThreadMs(served.pid)];
        await served.run(GATHER);
        walls[i].push(performance.now() - start);
        cpu[i] += mainThreadMs(served.pid) - main;
      }
    }
    return { cpu, walls };
  }

  async close(receiver: OtlpReceiver): Promise<void> {
    await Promise.all(this.serves.map((s) => s.close().catch(() => {})));
    await receiver.close();
    for (const home of this.#homes) removeHome(home);
    await removeLeftovers();
  }
}
