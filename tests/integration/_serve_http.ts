/**
 * Starts a real `codemode serve --http` (from source) in a throwaway HOME and connects SDK clients to it
 * over Streamable HTTP. Shared by the HTTP serve tests and the load suite.
 * @module
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { HOST_SECRET, ROOT } from "./_serve.ts";

/** A running `serve --http` process. */
export interface HttpServe {
  child: ChildProcess;
  pid: number;
  /** The URL it printed on stderr. */
  url: string;
  /** Everything it wrote on stdout (must stay empty) and stderr so far. */
  stdout(): string;
  stderr(): string;
  /** Sends `signal` and resolves with the exit code once the process is gone. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `codemode serve --http --port 0 ...args` in `home` (after `launcher`, a command prefix such as
 * nsenter's, which must exec it so the pid stays the serve's); resolves once it printed its URL.
 */
export function startHttpServe(
  home: string,
  env: Record<string, string> = {},
  args: string[] = [],
  launcher: string[] = [],
): Promise<HttpServe> {
  const command = [
    ...launcher,
    join(ROOT, "node_modules/.bin/deno"),
    ...["run", "-A", "--quiet", join(ROOT, "cli.ts"), "serve", "--http", "--port", "0", ...args],
  ];
  const child = spawn(
    command[0],
    command.slice(1),
    {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        CODEMODE_STATE_DIR: join(home, "state"),
        CODEMODE_LOG_LEVEL: "info",
        CODEMODE_TEST_HOST_SECRET: HOST_SECRET,
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  let err = "";
  child.stdout!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let started = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`serve --http printed no URL within 60 s: ${err.slice(-1000)}`));
    }, 60_000);
    child.stderr!.on("data", (d) => {
      err += d;
      const url = /serving MCP over HTTP at (\S+)/.exec(err)?.[1];
      if (url && !started) {
        started = true;
        clearTimeout(timer);
        resolve({
          child,
          pid: child.pid!,
          url,
          stdout: () => out,
          stderr: () => err,
          async stop(signal = "SIGTERM") {
            // process.kill, not child.kill: Deno's child.kill reports a signal death even when the child
            // handled the signal and exited by itself.
            if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, signal);
            return await exited;
          },
        });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve --http exited (${code}) before printing its URL: ${err.slice(-1000)}`));
    });
  });
}

/** A v2 SDK client over Streamable HTTP, with run_python as a call. */
export interface HttpClient {
  client: Client;
  transport: StreamableHTTPClientTransport;
  sessionId(): string;
  run(code: string, timeout?: number): Promise<{ text: string; isError: boolean; value: unknown }>;
  /** Ends the session with DELETE, then closes the client. */
  end(): Promise<void>;
}

/** Connects a v2 SDK client to `url`, sending `headers` with every request; `client` may bring its own capabilities. */
export async function connectHttp(
  url: string,
  headers: Record<string, string> = {},
  client = new Client({ name: "codemode-http-tests", version: "1" }),
): Promise<HttpClient> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  return {
    client,
    transport,
    sessionId: () => transport.sessionId ?? "",
    async run(code, timeout) {
      const r = await client.callTool(
        { name: "run_python", arguments: { code, ...(timeout ? { timeout } : {}) } },
        { timeout: 180_000 },
      );
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      const structured = (r.structuredContent ?? {}) as Record<string, unknown>;
      return { text, isError: Boolean(r.isError), value: structured.value };
    },
    async end() {
      await transport.terminateSession();
      await client.close();
    },
  };
}

/** Names of podman containers (running or not) whose `label` has `value`. */
export function containersLabelled(label: string, value: string | number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(
      "podman",
      ["ps", "-a", "--filter", `label=${label}=${value}`, "--format", "{{.Names}}"],
      (error, stdout) =>
        error ? reject(error) : resolve(stdout.split("\n").map((s) => s.trim()).filter(Boolean)),
    );
  });
}

/** Polls `check` until it is true or `ms` pass; returns its last answer. */
export async function eventually(check: () => Promise<boolean>, ms = 15_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return await check();
}
