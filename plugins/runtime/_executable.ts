/**
 * Finding programs the way a shell does: an executable regular file, by path or on PATH. Shared by the
 * container engines (which podman, docker or nerdctl) and the Pyodide runtime (which deno).
 * @module
 */
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import process from "node:process";

/** Whether `path` is a regular file this process may execute. */
export function isExecutable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Where `command` resolves: itself when it has a slash, else the first executable file of that name on PATH. */
export function whichSync(command: string, path = process.env.PATH ?? ""): string | undefined {
  if (command.includes("/")) return isExecutable(command) ? command : undefined;
  for (const dir of path.split(delimiter).filter(Boolean)) {
    if (isExecutable(join(dir, command))) return join(dir, command);
  }
  return undefined;
}
