/**
 * The compiled binary alone (issue 18): PATH reduced to coreutils (no deno, node, bun, podman or docker
 * to find), a fresh HOME, no node_modules near the binary. The embedded runtime must take over: serve
 * answers real MCP clients, the Pyodide escape attempts fail from the binary too, a tampered unpacked
 * runtime is replaced and never run, and serves starting at once share one intact unpack.
 * @module
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { spawn } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  BINARY,
  everythingByPath,
  FORBIDDEN,
  HAVE_BINARY,
  ROOT,
  runBinary,
  type Sandbox,
  standalone,
  stateDirOf,
} from "./_binary.ts";
import { pyodideAttempts } from "../integration/_pyodide_attempts.ts";
import type { EmbedManifest } from "../../plugins/runtime/_pyodide_embedded.ts";

const MANIFEST_PATH = join(ROOT, "dist", "embed", `${process.platform}-${process.arch}`, "manifest.json");
const ignore = !HAVE_BINARY || !existsSync(MANIFEST_PATH);
const manifest: EmbedManifest | undefined = ignore
  ? undefined
  : JSON.parse(readFileSync(MANIFEST_PATH, "utf8"));
const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });

function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

/** Where each embedded file unpacks in `sandbox`'s state directory. */
function unpacked(sandbox: Sandbox, key: string): string {
  const file = manifest!.files[key];
  const version = file.dir === "deno" ? `${manifest!.deno}-${manifest!.target}` : manifest!.pyodide;
  return join(stateDirOf(sandbox), file.dir, version, file.name);
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** Every unpacked file is there with the digest and mode the build gave it, and no temporary file is left. */
function assertIntact(sandbox: Sandbox): void {
  for (const [key, file] of Object.entries(manifest!.files)) {
    const path = unpacked(sandbox, key);
    assert.equal(sha256(path), file.sha256, `${key} differs from the build`);
    assert.equal(statSync(path).mode & 0o777, file.mode, `${key} mode`);
  }
  for (const dir of ["deno", "pyodide"]) {
    const root = join(stateDirOf(sandbox), dir);
    for (const version of readdirSync(root)) {
      assert.equal(statSync(join(root, version)).mode & 0o777, 0o700, `${dir}/${version} is private`);
      const temps = readdirSync(join(root, version)).filter((name) => name.endsWith(".tmp"));
      assert.deepEqual(temps, [], `temporary files left in ${dir}/${version}`);
    }
  }
}

/** An SDK client on `binary serve` (stdio) in `sandbox`; stderr is collected. */
async function connect(sandbox: Sandbox): Promise<{ client: Client; stderr: () => string; pid: number }> {
  const transport = new StdioClientTransport({
    command: BINARY,
    args: ["serve"],
    env: sandbox.env,
    cwd: sandbox.cwd,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Uint8Array) => (stderr += new TextDecoder().decode(chunk)));
  const client = new Client({ name: "e2e-standalone", version: "1.0.0" });
  await client.connect(transport);
  return { client, stderr: () => stderr, pid: transport.pid! };
}

async function run(client: Client, code: string): Promise<{ text: string; isError: boolean }> {
  const result = await client.callTool({ name: "run_python", arguments: { code } }, { timeout: 300_000 });
  return { text: textOf(result), isError: Boolean(result.isError) };
}

test("on a bare machine doctor picks the embedded runtime and says why; run and search work", async () => {
  const sandbox = standalone(everythingByPath());
  for (const name of FORBIDDEN) {
    assert.ok(!existsSync(join(sandbox.env.PATH, name)), `${name} is reachable on PATH`);
  }
  const ran = await runBinary(["run", "-"], sandbox, { input: "x = 6\nprint(x * 7)\n", timeoutMs: 300_000 });
  assert.equal(ran.code, 0, ran.stderr);
  assert.equal(ran.stdout, "42\n");
  assertIntact(sandbox);

  const doctor = await runBinary(["doctor", "--json"], sandbox, { timeoutMs: 300_000 });
  const report = JSON.parse(doctor.stdout);
  assert.equal(report.runtime, "pyodide", doctor.stdout);
  assert.match(
    report.runtimeReason,
    /^auto takes the first that works of podman, docker, nerdctl, pyodide: podman is not installed; docker is not installed; nerdctl is not installed$/,
  );
  const pyodide = report.runtimes.find((r: { name: string }) => r.name === "pyodide");
  assert.equal(pyodide.sandbox?.ok, true, JSON.stringify(pyodide));
  assert.match(pyodide.version, /\(deno \d+\.\d+\.\d+, embedded\)/);
  assert.equal(doctor.code, 0, JSON.stringify(report.findings));
  const text = await runBinary(["doctor", "--quick"], { ...sandbox, env: { ...sandbox.env, NO_COLOR: "1" } });
  assert.match(
    text.stdout,
    /Why pyodide: auto takes the first that works of podman, docker, nerdctl, pyodide/,
  );

  const search = await runBinary(["search", "echo", "--json"], sandbox, { timeoutMs: 120_000 });
  assert.equal(search.code, 0, search.stderr);
  const hits = JSON.parse(search.stdout) as { server: string; tool: string }[];
  assert.ok(hits.some((h) => h.server === "everything" && h.tool === "echo"), search.stdout);
});

test("serve answers an MCP client from the binary alone: a run, a proxied call, state kept", async () => {
  const sandbox = standalone(everythingByPath(), { CODEMODE_LOG_LEVEL: "info" });
  const { client, stderr } = await connect(sandbox);
  try {
    const first = await run(client, "counter = 41\nprint('set')");
    assert.equal(first.isError, false, first.text + stderr());
    assert.equal(first.text.trim(), "set");
    const proxied = await run(client, "r = await mcp_everything.echo(message='from the binary alone')\nr");
    assert.equal(proxied.isError, false, proxied.text);
    assert.match(proxied.text, /from the binary alone/);
    const second = await run(client, "counter + 1");
    assert.equal(second.text.trim(), "42");
  } finally {
    await client.close();
  }
  assert.match(stderr(), /"selected runtime","runtime":"pyodide","version":"[^"]*embedded\)"/);
  assertIntact(sandbox);
});

test("every Pyodide escape attempt fails from the binary, and the sandbox gets an empty environment", async () => {
  const scratch = mkdtempSync(join(tmpdir(), "codemode-e2e-escape-"));
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let connections = 0;
  void (async () => {
    for await (const conn of listener) {
      connections++;
      conn.close();
    }
  })().catch(() => {});
  const secret = `s3cret-${crypto.randomUUID()}`;
  const sandbox = standalone({}, { CODEMODE_E2E_SECRET: secret });
  const hostFile = join(scratch, "host-only.txt");
  writeFileSync(hostFile, secret);
  const target = join(scratch, "pwned.txt");
  const attempts = pyodideAttempts({
    stateDir: stateDirOf(sandbox),
    hostFile,
    target,
    port: listener.addr.port,
    secretName: "CODEMODE_E2E_SECRET",
  });
  const { client, pid } = await connect(sandbox);
  try {
    assert.equal((await run(client, "1 + 1")).text.trim(), "2");
    for (const [what, code, expected] of attempts) {
      const r = await run(client, code);
      assert.equal(r.isError, true, `${what}: the attempt did not fail: ${r.text}`);
      assert.match(r.text, expected, `${what}: unexpected failure`);
      assert.ok(!r.text.includes(secret), `${what}: the secret leaked`);
      assert.equal((await run(client, "1 + 1")).text.trim(), "2", `${what}: the next run failed`);
    }
    // The sandbox process is the unpacked Deno, a child of the serve, with four variables and no more.
    const children = readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid;
      } catch {
        return false;
      }
    });
    const sandboxes = children.filter((p) => readFileSync(`/proc/${p}/cmdline`, "utf8").includes("host-"));
    assert.equal(sandboxes.length, 1, `one sandbox process: ${children}`);
    const exe = readFileSync(`/proc/${sandboxes[0]}/cmdline`, "utf8").split("\0")[0];
    assert.equal(exe, unpacked(sandbox, "deno"), "the sandbox runs the unpacked Deno");
    const environ = readFileSync(`/proc/${sandboxes[0]}/environ`, "utf8").split("\0").filter(Boolean);
    assert.deepEqual(environ.map((e) => e.split("=")[0]).sort(), [
      "DENO_DIR",
      "DENO_NO_PROMPT",
      "DENO_NO_UPDATE_CHECK",
      "NO_COLOR",
    ]);
  } finally {
    await client.close();
    listener.close();
  }
  assert.equal(connections, 0, "nothing connected to the listener");
  assert.equal(existsSync(target), false, "no file was written on the host");
  assertIntact(sandbox);
  rmSync(scratch, { recursive: true, force: true });
});

/** A Deno stand-in that proves it ran by writing `marker`. */
function impostor(marker: string): string {
  return `#!/bin/sh\necho ran > '${marker}'\nexit 3\n`;
}

test("a tampered unpacked runtime is replaced before it could run, in a new process or a running serve", async () => {
  const sandbox = standalone();
  const marker = join(sandbox.home, "..", "impostor-ran");
  const deno = () => unpacked(sandbox, "deno");
  const again = async (what: string) => {
    const ran = await runBinary(["run", "-"], sandbox, { input: "print(6 * 7)\n", timeoutMs: 300_000 });
    assert.equal(ran.code, 0, `${what}: ${ran.stderr}`);
    assert.equal(ran.stdout, "42\n", what);
    assert.equal(existsSync(marker), false, `${what}: the tampered file ran`);
    assertIntact(sandbox);
    return ran;
  };
  await again("first use");

  // Swapped for a script (the mode kept executable).
  writeFileSync(deno(), impostor(marker));
  chmodSync(deno(), 0o700);
  const swapped = await again("deno swapped for a script");
  assert.match(swapped.stderr, /did not match their digests and were replaced/);
  assert.match(swapped.stderr, /"deno"/);

  // One byte changed, size and mtime put back.
  const bytes = readFileSync(deno());
  const before = statSync(deno());
  bytes[bytes.length >> 1] ^= 0xff;
  writeFileSync(deno(), bytes);
  utimesSync(deno(), before.atime, before.mtime);
  await again("one byte of deno changed");

  // The files the sandbox loads.
  writeFileSync(unpacked(sandbox, "snapshot"), "not a snapshot");
  writeFileSync(unpacked(sandbox, "pyodide.asm.wasm"), "not wasm");
  writeFileSync(unpacked(sandbox, "host"), "Deno.exit(9)");
  const files = await again("snapshot, wasm and host program changed");
  assert.match(files.stderr, /"snapshot"/);

  // Within one serve: the first session ran the checked Deno; the second launch finds it swapped.
  const http = await startHttp(sandbox);
  try {
    const a = await httpClient(http.url);
    assert.equal((await run(a, "1 + 1")).text.trim(), "2");
    // The running executable can't be written to (ETXTBSY): an attacker would rename a new one over it.
    writeFileSync(`${deno()}.new`, impostor(marker), { mode: 0o700 });
    renameSync(`${deno()}.new`, deno());
    const b = await httpClient(http.url);
    const r = await run(b, "2 + 2");
    assert.equal(r.isError, false, r.text + http.stderr());
    assert.equal(r.text.trim(), "4");
    assert.equal(existsSync(marker), false, "the swapped Deno ran inside the serve");
    await Promise.all([a.close(), b.close()]);
  } finally {
    await http.stop();
  }
  assertIntact(sandbox);
});

test("serves starting at once on a fresh HOME all answer, and the unpack stays intact", async () => {
  const sandbox = standalone();
  const started = performance.now();
  const answers = await Promise.all([0, 1, 2].map(async (i) => {
    const { client, stderr } = await connect(sandbox);
    try {
      const r = await run(client, `${i} + 40`);
      assert.equal(r.isError, false, r.text + stderr());
      return r.text.trim();
    } finally {
      await client.close();
    }
  }));
  assert.deepEqual(answers, ["40", "41", "42"]);
  assertIntact(sandbox);
  console.log(`3 concurrent first starts answered within ${(performance.now() - started).toFixed(0)} ms`);
});

/** `binary serve --http --port 0` in `sandbox`; resolves once it printed its URL. */
function startHttp(
  sandbox: Sandbox,
): Promise<{ url: string; stderr: () => string; stop: () => Promise<void> }> {
  const child = spawn(BINARY, ["serve", "--http", "--port", "0"], {
    cwd: sandbox.cwd,
    env: sandbox.env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL within 60 s: ${err}`)), 60_000);
    child.stderr!.on("data", (d) => {
      err += d;
      const url = /serving MCP over HTTP at (\S+)/.exec(err)?.[1];
      if (!url) return;
      clearTimeout(timer);
      resolve({
        url,
        stderr: () => err,
        stop: async () => {
          if (child.exitCode === null) process.kill(child.pid!, "SIGTERM");
          await exited;
        },
      });
    });
  });
}

async function httpClient(url: string): Promise<Client> {
  const client = new Client({ name: "e2e-standalone-http", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}
