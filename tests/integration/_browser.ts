/**
 * A real browser for the dashboard tests: Debian's headless Chromium driven by puppeteer-core (no browser
 * download), and `codemode ui` started from source in a test HOME.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import puppeteer, { type Browser } from "puppeteer-core";
import { ROOT } from "./_serve.ts";

/** Debian's chromium package (scripts/setup.sh installs it). */
export const CHROMIUM = process.env.CODEMODE_CHROMIUM ?? "/usr/bin/chromium";
/** Whether the browser tests can run here. */
export const HAVE_CHROMIUM = existsSync(CHROMIUM);

/** Starts headless Chromium with nothing that reaches the network. */
export async function launchBrowser(): Promise<Browser> {
  return await puppeteer.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

/** A running `codemode ui`. */
export interface UiProcess {
  child: ChildProcess;
  /** The dashboard's address, "http://127.0.0.1:PORT/". */
  url: string;
  /** The one-time login URL it printed. */
  loginUrl: string;
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Starts `codemode ui --port 0` (with `--no-open` unless `open`) in `home`, its state dir under it, from
 * source or as `binary`; resolves once it printed its URLs.
 */
export function startUi(
  home: string,
  env: Record<string, string> = {},
  binary?: string,
  options: { open?: boolean } = {},
): Promise<UiProcess> {
  const ui = ["ui", "--port", "0", ...(options.open ? [] : ["--no-open"])];
  const [command, args] = binary
    ? [binary, ui]
    : [join(ROOT, "node_modules/.bin/deno"), ["run", "-A", "--quiet", join(ROOT, "cli.ts"), ...ui]];
  const child = spawn(command, args, {
    cwd: home,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: home,
      CODEMODE_STATE_DIR: join(home, "state"),
      CODEMODE_LOG_LEVEL: "warn",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`codemode ui printed no login URL within 60 s: ${err.slice(-1000)}`));
    }, 60_000);
    child.stderr!.on("data", (d) => {
      err += d;
      const url = /dashboard at (\S+)/.exec(err)?.[1];
      const loginUrl = /sign in by opening (\S+)/.exec(err)?.[1];
      if (url && loginUrl) {
        clearTimeout(timer);
        resolve({
          child,
          url,
          loginUrl,
          stderr: () => err,
          async stop() {
            if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGTERM");
            await exited;
          },
        });
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`codemode ui exited before printing its URLs: ${err.slice(-1000)}`));
    });
  });
}

/** Where the dashboard tests write screenshots: docs/images when CODEMODE_UPDATE_SCREENSHOTS=1. */
export function screenshotPath(name: string): string {
  const dir = process.env.CODEMODE_UPDATE_SCREENSHOTS === "1"
    ? join(ROOT, "docs", "images")
    : join(ROOT, ".scratch", "screenshots");
  Deno.mkdirSync(dir, { recursive: true });
  return join(dir, `${name}.png`);
}
