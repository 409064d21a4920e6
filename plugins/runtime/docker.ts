/**
 * The docker runtime plugin, through the shared OCI-CLI base.
 * @module
 */

import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { type OciOptions, ociRuntime } from "./oci_base.ts";

/** Options of the docker plugin. */
export type DockerOptions = OciOptions;

/** Defaults of the docker plugin (the daemon's default OCI runtime). */
export const defaults = {
  command: ["docker"],
  init: true,
  nofile: 1024,
  tmpfsSize: "256m",
} satisfies DockerOptions;

/** Creates the docker runtime plugin. */
export function docker(options: DockerOptions = {}): RuntimePlugin & ImageStore {
  return ociRuntime("docker", { ...defaults, ...options });
}
