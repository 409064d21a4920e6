/**
 * What both `serve` transports start with: a clean stdout, the codemode app, and the slow start-up work
 * (reaping leftover sandboxes, choosing a runtime) under way in the background.
 * @module
 */
import { type Codemode, createCodemode } from "../mod.ts";
import { log } from "../core/observe/log.ts";

/** Creates the app for `serve`; stdout is kept free of library output from here on. */
export async function startServeApp(): Promise<Codemode> {
  // stdout belongs to the protocol (stdio) or to scripts that start us (HTTP): libraries must not print there.
  for (const method of ["log", "info", "debug"] as const) {
    console[method] = (...args: unknown[]) => console.error(...args);
  }
  const app = await createCodemode({ indexInBackground: true, tracing: true });
  void app.sessions.reapLeftovers().catch((e) =>
    log.warn("could not reap leftover sandboxes", { error: String(e) })
  );
  void app.artifacts.reapLeftovers().catch((e) =>
    log.warn("could not remove leftover artifacts", { error: String(e) })
  );
  void app.runtime().catch((e) => log.warn("no sandbox runtime yet", { error: String(e) }));
  return app;
}
