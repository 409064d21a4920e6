/**
 * Host folders in OCI sandboxes: which mounts an engine can make safely (nodev, nosuid, noexec) and the
 * `run` arguments that make them.
 * @module
 */

import type { SandboxMount } from "../../core/contracts/runtime.ts";
import type { OciEngine } from "./_oci_exec.ts";

/** The options every mount gets: the sandbox may not run, or gain privileges from, anything in it. */
export const MOUNT_OPTIONS = "nodev,nosuid,noexec";

/**
 * Why `engine` cannot mount `mount` safely, or undefined when it can. docker applies mount options only by
 * remounting, which its local volume driver does for read-only binds alone: a writable bind would keep
 * exec, suid and dev, so docker is refused it. nerdctl is not supported.
 */
export function mountProblem(engine: OciEngine, mount: SandboxMount): string | undefined {
  if (engine === "nerdctl") return `nerdctl sandboxes cannot mount host folders ("${mount.host}")`;
  if (engine === "docker" && !mount.readOnly) {
    return `Cannot mount "${mount.host}" read-write at "${mount.target}" with docker: docker applies ` +
      `${MOUNT_OPTIONS} to read-only mounts only; make it read-only (drop ":rw" in CODEMODE_MOUNTS or the ` +
      "config file's mounts) or use podman (CODEMODE_RUNTIME=podman)";
  }
  return undefined;
}

/**
 * The `run` arguments that mount one host folder with nodev, nosuid and noexec. podman takes them on `-v`.
 * docker's `-v` and bind `--mount` take none of them, so docker gets an anonymous volume of its local driver
 * that binds the folder with `o=bind,ro,nodev,nosuid,noexec` (removed with the container).
 */
export function mountArgs(engine: OciEngine, mount: SandboxMount): string[] {
  const problem = mountProblem(engine, mount);
  if (problem) throw new Error(problem);
  const mode = mount.readOnly ? "ro" : "rw";
  if (engine === "podman") return ["-v", `${mount.host}:${mount.target}:${mode},${MOUNT_OPTIONS}`];
  const fields = [
    "type=volume",
    `dst=${mount.target}`,
    "volume-driver=local",
    "volume-opt=type=none",
    `volume-opt=device=${mount.host}`,
    `volume-opt=o=bind,${mode},${MOUNT_OPTIONS}`,
  ];
  return ["--mount", fields.map(csvField).join(",")];
}

/** One field of docker's CSV `--mount` syntax, quoted when it holds a comma or a quote. */
function csvField(field: string): string {
  return /[",\n\r]/.test(field) ? `"${field.replaceAll('"', '""')}"` : field;
}
