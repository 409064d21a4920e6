/**
 * The nerdctl (containerd) runtime plugin, through the shared OCI-CLI base.
 * @module
 */

import type { ImageStore, RuntimePlugin } from "../../core/contracts/runtime.ts";
import { type OciOptions, ociRuntime } from "./oci_base.ts";

/** Options of the nerdctl plugin. */
export type NerdctlOptions = OciOptions;

/** Defaults of the nerdctl plugin (containerd's default OCI runtime). */
export const defaults = {
  command: ["nerdctl"],
  init: true,
  nofile: 1024,
  tmpfsSize: "256m",
} satisfies NerdctlOptions;

/** Creates the nerdctl runtime plugin. */
export function nerdctl(options: NerdctlOptions = {}): RuntimePlugin & ImageStore {
  return ociRuntime("nerdctl", { ...defaults, ...options });
}
