/**
 * Whether a process id names a live process, for finding what a dead codemode left behind (sandboxes,
 * stats snapshots).
 * @module
 */
import process from "node:process";

/** True when `pid` exists, including one we may not signal (EPERM: alive, owned by someone else). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}
