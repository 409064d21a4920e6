/**
 * `codemode ui` as a command: it opens the browser through a private redirect file (so the login code is
 * never on a command line other users can read), cleans up on SIGTERM, and says clearly what is wrong
 * with a bad or busy port.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./_serve.ts";
import { startUi } from "./_browser.ts";

const DENO = join(ROOT, "node_modules/.bin/deno");

function ui(home: string, args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      DENO,
      ["run", "-A", "--quiet", join(ROOT, "cli.ts"), "ui", ...args],
      {
        cwd: home,
        env: { PATH: process.env.PATH ?? "", HOME: home, CODEMODE_STATE_DIR: join(home, "state") },
      },
      (error, _stdout, stderr) =>
        resolve({ code: error ? (error as { code?: number }).code ?? 1 : 0, stderr }),
    );
  });
}

Deno.test("codemode ui opens the browser on a 0600 redirect file, never with the login code on a command line", async () => {
  const home = mkdtempSync(join(tmpdir(), "codemode-ui-"));
  const bin = join(home, "bin");
  mkdirSync(bin);
  const argsFile = join(home, "xdg-open-args");
  writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\nprintf '%s\\n' "$@" > ${argsFile}\n`);
  chmodSync(join(bin, "xdg-open"), 0o755);
  const server = await startUi(home, { PATH: `${bin}:${process.env.PATH}` }, undefined, { open: true });
  try {
    for (let i = 0; i < 100 && !existsSync(argsFile); i++) await new Promise((r) => setTimeout(r, 100));
    const args = readFileSync(argsFile, "utf8").trim().split("\n");
    const code = new URL(server.loginUrl).searchParams.get("login")!;
    assert.equal(args.length, 1);
    assert.ok(!args[0].includes(code), "the code is not on xdg-open's command line");
    assert.match(args[0], /\/state\/ui\/open-\d+\.html$/);
    assert.equal(statSync(args[0]).mode & 0o777, 0o600);
    assert.ok(
      readFileSync(args[0], "utf8").includes(`url=${server.loginUrl}`),
      "it redirects to the login URL",
    );
    await server.stop();
    assert.equal(existsSync(args[0]), false, "the redirect file is removed when codemode ui stops");
  } finally {
    await server.stop();
  }
});

Deno.test("codemode ui says what is wrong with a bad or busy port", async () => {
  const home = mkdtempSync(join(tmpdir(), "codemode-ui-"));
  const bad = await ui(home, ["--port", "http", "--no-open"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /Invalid --port "http": expected a whole number from 0 to 65535/);
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", () => resolve()));
  try {
    const port = (busy.address() as { port: number }).port;
    const taken = await ui(home, ["--port", String(port), "--no-open"]);
    assert.equal(taken.code, 1);
    assert.match(taken.stderr, new RegExp(`Port ${port} is in use: pass another --port, or --port 0`));
  } finally {
    busy.close();
  }
});
