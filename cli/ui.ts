/**
 * `codemode ui [--port N] [--no-open]`: the live dashboard of every `codemode serve` on this machine
 * (under this state dir), on 127.0.0.1 only. Prints a one-time login URL on stderr and opens the browser
 * on it, through a 0600 redirect file (as Jupyter does) so the code never shows in the process list.
 * Stops on SIGINT or SIGTERM.
 * @module
 */
import { spawn } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { cliConfig } from "./_config.ts";
import { ToolCatalog } from "../core/catalog/catalog.ts";
import { policySearch } from "../core/dashboard/search.ts";
import { SkillsPanel } from "../core/dashboard/skills.ts";
import { startUi } from "../core/dashboard/ui.ts";
import type { Settings } from "../core/config/settings.ts";
import type { SkillStore } from "../core/skills/store.ts";
import { skillRoots } from "../core/skills/sources.ts";
import { VERSION } from "../core/version.ts";
import { TOKEN_ENV } from "./serve_http.ts";

/** Default port of `codemode ui` (serve --http uses 8765). */
export const DEFAULT_UI_PORT = 8766;

/** Options of `codemode ui`, as commander hands them over. */
export interface UiCommandOptions {
  port?: string;
  /** false with --no-open. */
  open?: boolean;
  token?: string;
}

/** Runs the dashboard until SIGINT or SIGTERM; resolves with the exit code. */
export async function ui(options: UiCommandOptions): Promise<number> {
  const port = Number(options.port ?? DEFAULT_UI_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(
      `codemode: Invalid --port "${options.port}": expected a whole number from 0 to 65535\n`,
    );
    return 2;
  }
  const config = await cliConfig();
  // The same search as `codemode search`: the on-disk catalog, servers missing from it listed in the background.
  const allowed = config.discovery.servers.filter((s) => config.policy.allowsServer(s.name).ok);
  const catalog = new ToolCatalog(allowed, config.lister, { stateDir: config.settings.stateDir });
  void catalog.start();
  // Skills as `codemode skills list` reads them; their docs join the search, as in `codemode search`.
  const skillStore = lazySkills(config.settings, (store) => catalog.setSkillDocs(store.docs()));
  const skills = new SkillsPanel(skillStore, config.settings.skills);
  const search = policySearch(catalog, config.policy);
  let server;
  try {
    server = await startUi({
      stateDir: config.settings.stateDir,
      port,
      version: VERSION,
      search: async (query, limit) => {
        await (await skillStore())?.fresh();
        return search(query, limit);
      },
      skills: () => skills.view(),
      token: (options.token ?? process.env[TOKEN_ENV])?.trim() || undefined,
    });
  } catch (error) {
    await Promise.allSettled([catalog.close(), config.close()]);
    process.stderr.write(`codemode: ${(error as Error).message}\n`);
    return 1;
  }
  // Listen for the signals before anything else can take time: one arriving earlier would end the
  // process without removing the redirect file.
  const stopped = new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
  process.stderr.write(
    `codemode: dashboard at ${server.url}\n` +
      `codemode: sign in by opening ${server.loginUrl}\n` +
      "codemode: (the link works once; press Ctrl+C to stop)\n",
  );
  const redirect = join(config.settings.stateDir, "ui", `open-${process.pid}.html`);
  if (options.open !== false) await openBrowser(server.loginUrl, redirect);
  await stopped;
  await Promise.allSettled([server.close(), catalog.close(), config.close(), rm(redirect, { force: true })]);
  setTimeout(() => process.exit(0), 50).unref?.();
  return 0;
}

/** The skill store of `settings`, opened on first use (undefined when skills are off); `loaded` hears each load. */
function lazySkills(
  settings: Settings,
  loaded: (store: SkillStore) => void,
): () => Promise<SkillStore | undefined> {
  let opened: Promise<SkillStore | undefined> | undefined;
  return () =>
    opened ??= settings.skills === "off" ? Promise.resolve(undefined) : import("../core/skills/store.ts")
      .then(({ SkillStore }) =>
        SkillStore.open({
          roots: skillRoots({ dirs: settings.skillDirs, userDir: settings.skillsDir }),
          mode: settings.skills as "rw" | "ro",
        })
      )
      .then((store) => {
        loaded(store);
        store.onChange(() => loaded(store));
        return store;
      })
      .catch((error) => {
        process.stderr.write(`codemode: could not read the skills: ${(error as Error).message}\n`);
        opened = undefined;
        return undefined;
      });
}

/**
 * Opens `url` in the user's browser through a redirect file only this user can read: a URL on the
 * command line of xdg-open would show the login code to every local user in the process list.
 */
async function openBrowser(url: string, redirect: string): Promise<void> {
  try {
    await mkdir(join(redirect, ".."), { recursive: true, mode: 0o700 });
    const attribute = url.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
    await writeFile(
      redirect,
      `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${attribute}">` +
        `<title>codemode</title><p><a href="${attribute}">Open the codemode dashboard</a></p>\n`,
      { mode: 0o600 },
    );
  } catch (error) {
    process.stderr.write(
      `codemode: could not open a browser (${(error as Error).message}); open the URL above\n`,
    );
    return;
  }
  const command = process.platform === "darwin"
    ? ["open", redirect]
    : process.platform === "win32"
    ? ["cmd", "/c", "start", "", redirect]
    : ["xdg-open", redirect];
  try {
    const child = spawn(command[0], command.slice(1), { detached: true, stdio: "ignore" });
    child.once(
      "error",
      () =>
        process.stderr.write(`codemode: could not run ${command[0]} to open a browser; open the URL above\n`),
    );
    child.unref();
  } catch {
    process.stderr.write(`codemode: could not open a browser; open the URL above\n`);
  }
}
