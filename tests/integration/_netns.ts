/**
 * Separate hosts on one machine for the fleet tests: one network namespace per host, each joined by a
 * veth pair to a bridge in the test's own namespace, on a /24 of 10.0.0.0/8 that no route or address of
 * the machine uses. Names carry this process's pid and a random tag, so tests running at the same time
 * never meet; only what this process made is removed, on `remove()` and when the worker unloads.
 *
 * Commands enter a host with `nsenter --net=/run/netns/NAME`, which enters only its network namespace
 * (`ip netns exec` also remounts /sys, which breaks container engines).
 * @module
 */
import { execFileSync } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";

/** One host: its namespace and its address on the bridge. */
export interface Host {
  ns: string;
  address: string;
  /** The command prefix that runs a program on this host. */
  enter: string[];
}

/** Hosts on one bridge; the bridge's address (the test's side) is `gateway`. */
export interface Hosts {
  hosts: Host[];
  gateway: string;
  /** Deletes the namespaces (their veth ends go with them) and the bridge; idempotent. */
  remove(): void;
}

/** Whether this machine can make namespaces here (root, `ip`, `nsenter`). */
export function netnsUsable(): boolean {
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
    execFileSync("nsenter", ["--version"], { stdio: "ignore" });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** A 10.x.y.0/24 whose prefix no address or route of the machine mentions. */
function freeSubnet(): string {
  const used = execFileSync("ip", ["-4", "route", "show", "table", "all"], { encoding: "utf8" }) +
    execFileSync("ip", ["-4", "addr"], { encoding: "utf8" });
  for (let attempt = 0; attempt < 200; attempt++) {
    const prefix = `10.${randomInt(64, 250)}.${randomInt(1, 250)}`;
    if (!used.includes(`${prefix}.`)) return prefix;
  }
  throw new Error("no free 10.x.y.0/24 subnet found for the test hosts");
}

/** Makes `count` hosts on a bridge of their own. */
export function makeHosts(count: number): Hosts {
  const tag = `${process.pid.toString(36)}${randomBytes(2).toString("hex")}`.slice(-8);
  const bridge = `cmf${tag}`; // interface names: 15 characters at most
  const prefix = freeSubnet();
  const namespaces: string[] = [];
  let bridgeMade = false;
  const remove = () => {
    for (const ns of namespaces.splice(0)) {
      try {
        ip("netns", "delete", ns);
      } catch { /* already gone */ }
    }
    if (bridgeMade) {
      bridgeMade = false;
      try {
        ip("link", "delete", bridge);
      } catch { /* already gone */ }
    }
  };
  globalThis.addEventListener("unload", remove);
  try {
    ip("link", "add", bridge, "type", "bridge");
    bridgeMade = true;
    ip("addr", "add", `${prefix}.1/24`, "dev", bridge);
    ip("link", "set", bridge, "up");
    const hosts: Host[] = [];
    for (let i = 0; i < count; i++) {
      const ns = `codemode-fleet-${tag}-${i}`;
      const veth = `${bridge}v${i}`;
      ip("netns", "add", ns);
      namespaces.push(ns);
      ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns);
      ip("link", "set", veth, "master", bridge, "up");
      const address = `${prefix}.${i + 2}`;
      ip("-n", ns, "addr", "add", `${address}/24`, "dev", "eth0");
      ip("-n", ns, "link", "set", "eth0", "up");
      ip("-n", ns, "link", "set", "lo", "up");
      hosts.push({ ns, address, enter: ["nsenter", `--net=/run/netns/${ns}`, "--"] });
    }
    return { hosts, gateway: `${prefix}.1`, remove };
  } catch (error) {
    remove();
    throw error;
  }
}
