/**
 * Driving OAuth logins without a person: the "browser" is fetch. It opens the authorize URL, finds the
 * approval link on the page, and follows it, which redirects to codemode's loopback callback. Also runs
 * CLI commands of codemode from source and collects their output.
 * @module
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "./_serve.ts";

/** What a CLI command printed and how it exited. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts `codemode <args>` from source; `onStderr` sees stderr as it grows. */
function start(args: string[], env: Record<string, string>, onStderr?: (text: string) => void) {
  const child = spawn(join(ROOT, "node_modules/.bin/deno"), [
    "run",
    "-A",
    "--quiet",
    join(ROOT, "cli.ts"),
    ...args,
  ], {
    cwd: env.HOME,
    env: { PATH: process.env.PATH ?? "", NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const run: CliRun = { code: null, stdout: "", stderr: "" };
  child.stdout.on("data", (d) => (run.stdout += d));
  child.stderr.on("data", (d) => {
    run.stderr += d;
    onStderr?.(run.stderr);
  });
  const exited = new Promise<CliRun>((resolve) => child.on("close", (code) => resolve({ ...run, code })));
  return { child, exited };
}

/** Runs one CLI command to its end. */
export async function cli(args: string[], env: Record<string, string>): Promise<CliRun> {
  return await start(args, env).exited;
}

/** The approval link on the authorization page at `authorizeUrl`. */
export async function approvalLink(authorizeUrl: string): Promise<URL> {
  const page = await fetch(authorizeUrl);
  const html = await page.text();
  assert.equal(page.status, 200, `the authorize page answered ${page.status}: ${html.slice(0, 300)}`);
  const href = /id="approve" href="([^"]+)"/.exec(html)?.[1];
  assert.ok(href, `no approve link on the authorize page: ${html.slice(0, 300)}`);
  return new URL(href.replace(/&amp;/g, "&"), authorizeUrl);
}

/** Approves at the authorization server and returns where it sends the browser (the callback URL). */
export async function approveWithoutFollowing(authorizeUrl: string): Promise<URL> {
  const answer = await fetch(await approvalLink(authorizeUrl), { redirect: "manual" });
  await answer.body?.cancel();
  const location = answer.headers.get("location");
  assert.equal(answer.status, 302, "approving redirects to the client");
  assert.ok(location, "the approval has a Location");
  return new URL(location);
}

/** Approves and follows the redirect to the loopback callback, as a browser would; the callback's answer. */
export async function approve(authorizeUrl: string): Promise<Response> {
  return await fetch(await approvalLink(authorizeUrl));
}

/** What a CLI login saw. */
export interface CliLogin extends CliRun {
  /** The authorize URL it printed. */
  authorizeUrl: string;
}

/**
 * Runs `codemode auth login <server> --no-browser` and plays the browser: `browse` gets the authorize URL
 * the CLI printed (default: approve and follow the redirect).
 */
export async function cliLogin(
  server: string,
  env: Record<string, string>,
  browse: (authorizeUrl: string) => Promise<unknown> = approve,
): Promise<CliLogin> {
  let found: (url: string) => void;
  const printed = new Promise<string>((resolve) => (found = resolve));
  const { exited } = start(["auth", "login", server, "--no-browser"], env, (stderr) => {
    const url = /^\s+(http:\/\/\S+)$/m.exec(stderr)?.[1];
    if (url) found(url);
  });
  const outcome = await Promise.race([printed.then((url) => ({ url })), exited.then((run) => ({ run }))]);
  if ("run" in outcome) return { ...outcome.run, authorizeUrl: "" };
  await browse(outcome.url);
  return { ...(await exited), authorizeUrl: outcome.url };
}
