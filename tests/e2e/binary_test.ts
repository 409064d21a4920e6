/// <reference lib="dom" />
/**
 * The compiled binary (dist/codemode) end to end: real MCP clients (SDK v1, SDK v2, the MCP Inspector
 * CLI), real podman sandboxes, a real proxied MCP server, and `run`'s exit codes. Prints the numbers
 * the release notes quote (size, --version p50, serve start to initialize).
 * @module
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client";
import type { StdioClientTransport as StdioV1Type } from "@modelcontextprotocol/sdk/client/stdio";
// @ts-ignore: the package's "./*" export maps these types to "stdio.js.d.ts", which `deno check` cannot find
import { StdioClientTransport as StdioV1Untyped } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { VERSION } from "../../core/version.ts";
import {
  BINARY,
  environment,
  eventually,
  everythingServer,
  HAVE_BINARY,
  imagePresent,
  leftovers,
  median,
  ROOT,
  runBinary,
  type Sandbox,
} from "./_binary.ts";
import { HAVE_CHROMIUM, launchBrowser, startUi } from "../integration/_browser.ts";
import { startOtlpReceiver } from "../integration/_otlp_receiver.ts";

const exec = promisify(execFile);
const StdioV1 = StdioV1Untyped as unknown as typeof StdioV1Type;
const ignore = !HAVE_BINARY;
// Sandbox tests need the image; setup.sh builds it. Say so instead of failing obscurely.
const sandboxReady = HAVE_BINARY && imagePresent();
if (HAVE_BINARY && !sandboxReady) {
  console.error("e2e: podman has no codemode-sandbox:latest image; build it: codemode image build");
}

function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

Deno.test({
  name: "the binary prints its version without Deno or node_modules, from any directory",
  ignore,
  async fn() {
    const ran = await runBinary(["--version"], environment());
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout.trim(), `${VERSION} (binary, ${process.platform}-${process.arch})`);
    const times: number[] = [];
    for (let i = 0; i < 20; i++) times.push((await runBinary(["--version"], environment())).ms);
    const size = statSync(BINARY).size;
    console.log(
      `binary: ${(size / 1024 / 1024).toFixed(1)} MiB; --version p50 ${median(times).toFixed(0)} ms`,
    );
    assert.ok(median(times) < 1000, `--version is slow: p50 ${median(times)} ms`);
  },
});

Deno.test({
  name: "the binary's --help, rendered at build time, is the help the program prints from source",
  ignore,
  async fn() {
    const ran = await runBinary(["--help"], environment());
    assert.equal(ran.code, 0, ran.stderr);
    const { buildProgram } = await import("../../cli/program.ts");
    assert.equal(ran.stdout, buildProgram().helpInformation());
    assert.match(ran.stdout, /^Usage: codemode /);
    // Subcommands still parse with the full program, loaded on demand.
    const sub = await runBinary(["search", "--help"], environment());
    assert.equal(sub.code, 0, sub.stderr);
    assert.match(sub.stdout, /^Usage: codemode search /);
  },
});

Deno.test({
  name: "doctor --json parses, lists every runtime and finds podman working",
  ignore: !sandboxReady,
  async fn() {
    const ran = await runBinary(["doctor", "--json"], environment());
    const report = JSON.parse(ran.stdout);
    const names = report.runtimes.map((r: { name: string }) => r.name);
    for (const name of ["podman", "docker", "nerdctl"]) {
      assert.ok(names.includes(name), `${name} missing: ${names}`);
    }
    const podman = report.runtimes.find((r: { name: string }) => r.name === "podman");
    assert.equal(podman.sandbox?.ok, true, JSON.stringify(podman));
    assert.equal(report.runtime, "podman");
    assert.deepEqual(report.configs, []);
    assert.ok(
      report.settings.some((s: { env: string; source: string }) =>
        s.env === "CODEMODE_RUNTIME" && s.source === "CODEMODE_RUNTIME"
      ),
    );
    assert.equal(ran.code, report.ok ? 0 : 1);
    assert.equal(ran.code, 0, JSON.stringify(report.findings));
  },
});

Deno.test({
  name: "doctor exits 1 and names the fix when the configured image does not exist",
  ignore,
  async fn() {
    const ran = await runBinary(
      ["doctor", "--quick"],
      environment({}, { CODEMODE_IMAGE: "codemode-e2e-missing:none" }),
    );
    assert.equal(ran.code, 1, ran.stdout + ran.stderr);
    assert.match(ran.stdout, /codemode image build/);
  },
});

Deno.test({
  name: "the binary checks results against outputSchemas: its validation worker is compiled in",
  ignore: !sandboxReady,
  async fn() {
    // A worker that cannot start lets every result through; the binary's is an entry of its own.
    const hostile = {
      command: join(ROOT, "node_modules", ".bin", "deno"),
      args: ["run", "-A", join(ROOT, "tests", "testdata", "servers", "hostile_server.ts"), "--redos"],
    };
    const ran = await runBinary(["run", "-"], environment({ hostile }), {
      input:
        `try:\n    await mcp_hostile.redos_match(n=3)\n    print("passed")\nexcept Exception as e:\n    print(e)\n`,
    });
    assert.match(ran.stdout, /does not match the tool's outputSchema/, ran.stdout + ran.stderr);
  },
});

/** Connects an SDK client to `serve`, lists tools, runs code twice sharing state, and checks cleanup. */
async function serveRoundTrip(version: "v1" | "v2", sandbox: Sandbox): Promise<void> {
  const params = {
    command: BINARY,
    args: ["serve"],
    env: sandbox.env,
    cwd: sandbox.cwd,
    stderr: "pipe" as const,
  };
  const transport = version === "v1" ? new StdioV1(params) : new StdioV2(params);
  const client = version === "v1"
    ? new ClientV1({ name: "e2e-v1", version: "1.0.0" })
    : new ClientV2({ name: "e2e-v2", version: "1.0.0" });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const started = performance.now();
  // deno-lint-ignore no-explicit-any
  await (client as any).connect(transport);
  const initMs = performance.now() - started;
  const pid = transport.pid!;
  try {
    // deno-lint-ignore no-explicit-any
    const c = client as any;
    const { tools } = await c.listTools();
    assert.deepEqual(tools.map((t: { name: string }) => t.name), ["run_python"]);
    const first = await c.callTool({ name: "run_python", arguments: { code: "counter = 41\nprint('set')" } });
    assert.equal(first.isError, false, textOf(first) + stderr);
    assert.equal(textOf(first).trim(), "set");
    const second = await c.callTool({ name: "run_python", arguments: { code: "counter + 1" } });
    assert.equal(textOf(second).trim(), "42", stderr);
    assert.equal((second.structuredContent as { value?: string }).value, "42");
    console.log(`serve (${version} client): initialize answered after ${initMs.toFixed(0)} ms`);
  } finally {
    await client.close();
  }
  assert.ok(await eventually(() => leftovers(pid).length === 0), `containers left: ${leftovers(pid)}`);
}

Deno.test({
  name: "serve works with the v1 SDK client: one tool, state kept across two calls, no container left",
  ignore: !sandboxReady,
  fn: () => serveRoundTrip("v1", environment()),
});

Deno.test({
  name: "serve works with the v2 SDK client: one tool, state kept across two calls, no container left",
  ignore: !sandboxReady,
  fn: () => serveRoundTrip("v2", environment()),
});

const INSPECTOR = join(
  ROOT,
  "node_modules",
  "@modelcontextprotocol",
  "inspector",
  "clients",
  "launcher",
  "build",
  "index.js",
);

/**
 * Runs the MCP Inspector CLI against `codemode serve`; the server's env is passed with -e. The target
 * comes first: `--tool-arg` takes every following word as another key=value pair.
 */
async function inspector(sandbox: Sandbox, method: string[]): Promise<string> {
  const envFlags = Object.entries(sandbox.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  const { stdout } = await exec("node", [
    INSPECTOR,
    "--cli",
    BINARY,
    "serve",
    ...envFlags,
    "--cwd",
    sandbox.cwd,
    ...method,
  ], {
    cwd: sandbox.cwd,
    env: { ...process.env, HOME: sandbox.home },
    timeout: 120_000,
  });
  return stdout;
}

Deno.test({
  name: "serve answers the MCP Inspector CLI: tools/list and a run_python tools/call",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment();
    const list = JSON.parse(await inspector(sandbox, ["--method", "tools/list"]));
    assert.deepEqual(list.tools.map((t: { name: string }) => t.name), ["run_python"]);
    const call = JSON.parse(
      await inspector(sandbox, [
        "--method",
        "tools/call",
        "--tool-name",
        "run_python",
        "--tool-arg",
        "code=print(6 * 7)",
      ]),
    );
    assert.equal(call.isError, false);
    assert.equal(textOf(call).trim(), "42");
  },
});

function program(sandbox: Sandbox, name: string, code: string): string {
  const file = join(sandbox.cwd, name);
  writeFileSync(file, code);
  return file;
}

Deno.test({
  name: "run exits 0 and streams output as the program produces it, stdout and stderr apart",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment();
    const file = program(
      sandbox,
      "ok.py",
      "import sys, time\nprint('first', flush=True)\nprint('to stderr', file=sys.stderr)\ntime.sleep(2)\nprint('second')\n",
    );
    const ran = await runBinary(["run", file], sandbox);
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout, "first\nsecond\n");
    assert.match(ran.stderr, /to stderr/);
    const first = ran.stdoutTimes.find((t) => t.text.includes("first"))!;
    assert.ok(
      ran.ms - first.at > 1500,
      `"first" arrived ${first.at.toFixed(0)} ms in, the run took ${ran.ms.toFixed(0)} ms`,
    );
    assert.ok(
      await eventually(() => leftovers(ran.pid).length === 0),
      `containers left: ${leftovers(ran.pid)}`,
    );
  },
});

Deno.test({
  name: "run exports its trace from the binary: the span export worker is compiled in",
  ignore: !sandboxReady,
  async fn() {
    const receiver = await startOtlpReceiver();
    try {
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
      const sandbox = environment({}, {
        CODEMODE_OTLP_ENDPOINT: receiver.url,
        TRACEPARENT: `00-${traceId}-00f067aa0ba902b7-01`,
      });
      const ran = await runBinary(["run", program(sandbox, "traced.py", "print(1)\n")], sandbox);
      assert.equal(ran.code, 0, ran.stderr);
      assert.doesNotMatch(ran.stderr, /traces cannot be/);
      // No wait: the worker exported the run's spans before the binary exited.
      const run = receiver.spans.find((span) => span.name === "codemode run");
      assert.ok(run, `spans: ${receiver.spans.map((span) => span.name).join(", ")}; ${ran.stderr}`);
      assert.equal(run.traceId, traceId);
      assert.equal(run.resource["service.name"], "codemode");
    } finally {
      await receiver.close();
    }
  },
});

Deno.test({
  name: "run exits 1 when the program raises, with the traceback on stderr",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment();
    const ran = await runBinary(
      ["run", program(sandbox, "raise.py", "raise ValueError('bad input')\n")],
      sandbox,
    );
    assert.equal(ran.code, 1);
    assert.match(ran.stderr, /ValueError: bad input/);
  },
});

Deno.test({
  name: "run exits 124 on timeout and leaves no container",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment();
    const file = program(sandbox, "slow.py", "import time\ntime.sleep(60)\n");
    const ran = await runBinary(["run", "--timeout", "1", file], sandbox);
    assert.equal(ran.code, 124, ran.stderr);
    assert.match(ran.stderr, /timeout/i);
    assert.ok(ran.ms < 30_000, `took ${ran.ms} ms`);
    assert.ok(
      await eventually(() => leftovers(ran.pid).length === 0),
      `containers left: ${leftovers(ran.pid)}`,
    );
  },
});

Deno.test({
  name: "run exits 2 on usage errors: a missing file, a bad timeout, a bad output format",
  ignore,
  async fn() {
    const sandbox = environment();
    const missing = await runBinary(["run", join(sandbox.cwd, "nope.py")], sandbox);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /nope\.py/);
    const file = program(sandbox, "fine.py", "pass\n");
    assert.equal((await runBinary(["run", "--timeout", "soon", file], sandbox)).code, 2);
    assert.equal((await runBinary(["run", "--output", "yaml", file], sandbox)).code, 2);
    assert.equal((await runBinary(["run"], sandbox)).code, 2);
  },
});

Deno.test({
  name: "run reads the program from stdin and prints the final value in the chosen format",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment();
    const ran = await runBinary(["run", "--output", "json", "-"], sandbox, { input: "x = 20\nx * 2 + 2\n" });
    assert.equal(ran.code, 0, ran.stderr);
    const summary = JSON.parse(ran.stderr.trim().split("\n").at(-1)!);
    assert.equal(summary.status, "ok");
    assert.equal(summary.value, "42");
  },
});

Deno.test({
  name: "run calls a proxied MCP server (server-everything) and --servers rejects unknown names",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment(everythingServer());
    const file = program(
      sandbox,
      "echo.py",
      "print(await mcp_everything.echo(message='hello from the sandbox'))\n",
    );
    const ran = await runBinary(["run", "--servers", "everything", file], sandbox);
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stdout, /hello from the sandbox/);
    const unknown = await runBinary(["run", "--servers", "nosuch", file], sandbox);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /"nosuch"/);
  },
});

Deno.test({
  name: "serve proxies a call to server-everything for an SDK client",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment(everythingServer());
    const transport = new StdioV1({
      command: BINARY,
      args: ["serve"],
      env: sandbox.env,
      cwd: sandbox.cwd,
      stderr: "pipe",
    });
    const client = new ClientV1({ name: "e2e-proxy", version: "1.0.0" });
    await client.connect(transport);
    try {
      const result = await client.callTool({
        name: "run_python",
        arguments: { code: "r = await mcp_everything.echo(message='via serve')\nr" },
      });
      assert.equal(result.isError, false, textOf(result));
      assert.match(textOf(result), /via serve/);
    } finally {
      await client.close();
    }
  },
});

Deno.test({
  name: "SIGINT during run stops the sandbox: exit 130 and no container left",
  ignore: !sandboxReady,
  async fn() {
    const sandbox = environment();
    const file = program(
      sandbox,
      "forever.py",
      "import time\nprint('running', flush=True)\ntime.sleep(120)\n",
    );
    let pid = -1;
    const ran = await runBinary(["run", "--timeout", "100", file], sandbox, {
      onSpawn: (p, live) => {
        pid = p;
        void eventually(() => live.stdout.includes("running"), 60_000).then(() => process.kill(p, "SIGINT"));
      },
    });
    assert.equal(ran.code, 130, ran.stderr);
    assert.ok(await eventually(() => leftovers(pid).length === 0), `containers left: ${leftovers(pid)}`);
  },
});

Deno.test({
  name: "completions print a script for each shell from the binary",
  ignore,
  async fn() {
    for (const shell of ["bash", "zsh", "fish"]) {
      const ran = await runBinary(["completions", shell], environment());
      assert.equal(ran.code, 0, ran.stderr);
      assert.match(ran.stdout, /serve/);
    }
    assert.equal((await runBinary(["completions", "tcsh"], environment())).code, 2);
  },
});

Deno.test({
  name: "the binary logs in to an OAuth-protected server, proxies its tools to sandbox code, and logs out",
  ignore,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { startOAuthServer } = await import("../testdata/servers/oauth_server.ts");
    const { approve } = await import("../integration/_oauth.ts");
    const { spawn } = await import("node:child_process");
    const oauth = await startOAuthServer();
    try {
      const sandbox = environment({ secure: { type: "http", url: oauth.mcpUrl } });
      const child = spawn(BINARY, ["auth", "login", "secure", "--no-browser"], {
        cwd: sandbox.cwd,
        env: sandbox.env,
      });
      let stdout = "", stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      const url = await new Promise<string>((resolve) =>
        child.stderr.on("data", (d) => {
          stderr += d;
          const found = /^\s+(http:\/\/\S+)$/m.exec(stderr)?.[1];
          if (found) resolve(found);
        })
      );
      assert.equal((await approve(url)).status, 200);
      const code = await new Promise((resolve) => child.on("close", resolve));
      assert.equal(code, 0, stderr);
      assert.match(stdout, /Logged in to "secure"/);
      const status = await runBinary(["auth", "status", "--json"], sandbox);
      assert.equal(JSON.parse(status.stdout)[0].loggedIn, true);
      if (sandboxReady) {
        const ran = await runBinary(["run", "-"], sandbox, {
          input: 'print(await mcp_secure.echo(message="ok"))\n',
        });
        assert.equal(ran.code, 0, ran.stderr);
        assert.equal(ran.stdout, "ok\n");
      }
      const out = await runBinary(["auth", "logout", "secure"], sandbox);
      assert.match(out.stdout, /2 tokens revoked/);
      for (const token of oauth.issued()) assert.ok(!(stdout + stderr + status.stdout).includes(token));
    } finally {
      await oauth.close();
    }
  },
});

Deno.test({
  name: "the binary serves the dashboard from the files compiled into it, and the page runs in a browser",
  ignore: !sandboxReady,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const sandbox = environment(everythingServer());
    const ui = await startUi(sandbox.home, sandbox.env, BINARY);
    const client = new ClientV2({ name: "e2e-dashboard", version: "1" });
    const transport = new StdioV2({ command: BINARY, args: ["serve"], env: sandbox.env, cwd: sandbox.cwd });
    try {
      const login = await fetch(ui.loginUrl, { redirect: "manual" });
      assert.equal(login.status, 303);
      const cookie = String(login.headers.get("set-cookie")).split(";")[0];
      const page = await fetch(ui.url, { headers: { cookie } });
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<script type="importmap">/);
      const embedded: [string, string][] = [
        ["app.js", "core/dashboard/web/app.js"],
        ["style.css", "core/dashboard/web/style.css"],
        ["preact.mjs", "node_modules/preact/dist/preact.mjs"],
        ["hooks.mjs", "node_modules/preact/hooks/dist/hooks.mjs"],
        ["htm.mjs", "node_modules/htm/dist/htm.mjs"],
      ];
      for (const [name, source] of embedded) {
        const asset = await fetch(`${ui.url}assets/${name}`, { headers: { cookie } });
        assert.equal(asset.status, 200, name);
        assert.equal(
          await asset.text(),
          Deno.readTextFileSync(join(ROOT, source)),
          `${name} is the file it was built from`,
        );
      }
      const health = await (await fetch(`${ui.url}healthz`)).json();
      assert.equal(health.version, VERSION);

      await client.connect(transport);
      await client.callTool({ name: "run_python", arguments: { code: "# from the binary\nprint(1)" } });
      if (!HAVE_CHROMIUM) return console.error("e2e: no chromium; the page was not loaded in a browser");
      const browser = await launchBrowser();
      try {
        const tab = await browser.newPage();
        const problems: string[] = [];
        tab.on("console", (m) => m.type() === "error" && problems.push(m.text()));
        tab.on("pageerror", (e) => problems.push(String(e)));
        await browser.setCookie({
          name: cookie.split("=")[0],
          value: cookie.split("=")[1],
          domain: "127.0.0.1",
        });
        await tab.goto(ui.url);
        await tab.waitForFunction(
          () =>
            [...document.querySelectorAll("tr.run")].some((r) =>
              r.textContent!.includes("# from the binary")
            ),
          { timeout: 15_000 },
        );
        assert.deepEqual(problems, []);
      } finally {
        await browser.close();
      }
    } finally {
      await client.close().catch(() => {});
      await ui.stop();
    }
  },
});
