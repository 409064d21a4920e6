/**
 * The podman runtime plugin: rootful or rootless podman, through the shared OCI-CLI base.
 * @module
 */

import { existsSync } from "node:fs";
import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { type OciOptions, ociRuntime } from "./oci_base.ts";

/** Options of the podman plugin; `runtime: "auto"` picks runc where crun is known to fail. */
export type PodmanOptions = Omit<OciOptions, "runtime"> & { runtime?: string | "auto" };

/** Defaults of the podman plugin. */
export const defaults = {
  command: ["podman"],
  runtime: "auto",
  init: true,
  nofile: 1024,
  tmpfsSize: "256m",
} satisfies PodmanOptions;

/** The OCI runtime "auto" resolves to: runc unless the host has a pure cgroup v2 hierarchy. */
export function autoRuntime(cgroupRoot = "/sys/fs/cgroup"): string | undefined {
  // crun refuses cgroup v1 hosts with a hybrid v2 mount ("cgroups in hybrid mode not supported");
  // runc handles v1, hybrid and v2 alike. On pure v2 the engine's own choice is fine.
  return existsSync(`${cgroupRoot}/cgroup.controllers`) ? undefined : "runc";
}

/** Creates the podman runtime plugin. */
export function podman(options: PodmanOptions = {}): RuntimePlugin & ImageStore {
  const merged = { ...defaults, ...options };
  const runtime = merged.runtime === "auto" ? autoRuntime() : merged.runtime;
  return ociRuntime("podman", { ...merged, runtime });
}
