/**
 * Release binaries (issue 27): scripts/release.sh cross-compiles codemode for other platforms with each
 * platform's Bun and Deno from npm. The suite builds the two it can check, to keep its time down (the
 * four together take 2-4 minutes here; CODEMODE_E2E_RELEASE_DIR checks a full release instead):
 *
 * - linux-arm64 runs under qemu-user (`qemu-aarch64-static -L /usr/aarch64-linux-gnu`, since binfmt
 *   cannot be registered here): `--version`, and `doctor --quick --json`, which unpacks the carried
 *   arm64 Deno and Pyodide and starts a podman sandbox. Its Pyodide probe cannot start: the binary
 *   launches the arm64 Deno as a child process, which only binfmt would route through qemu. So a Pyodide
 *   run on arm64 is the carried Deno, unpacked by the binary, run under qemu by the host session directly
 *   (about 5 minutes under emulation here: opt in with CODEMODE_E2E_QEMU_PYODIDE=1).
 * - darwin binaries are checked for format and size only: Mach-O 64-bit executables for their CPU that
 *   carry a code signature load command.
 *
 * SHA256SUMS must list every binary and match it (`sha256sum -c`).
 * @module
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { Buffer } from "node:buffer";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { VERSION } from "../../core/version.ts";
import { makeCoreutilsDir } from "./_coreutils.ts";
import { podmanOnlyPath, ROOT, runCommand, tempDir } from "./_npm.ts";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import { bootstrapFrame, SANDBOX_RUNTIME } from "../../sandbox/source.ts";
import { SandboxSession } from "../../core/sandbox/session.ts";
import { echoRpc, pyodideStart } from "../integration/_harness.ts";
import type { EmbedManifest } from "../../plugins/runtime/_pyodide_embedded.ts";
import { sha256File } from "../../plugins/runtime/_unpack.ts";

const QEMU = "/usr/bin/qemu-aarch64-static";
const SYSROOT = "/usr/aarch64-linux-gnu";
const haveQemu = existsSync(QEMU) && existsSync(join(SYSROOT, "lib", "libc.so.6"));
if (!haveQemu) {
  console.error(
    `!! ${QEMU} or ${SYSROOT} is missing (scripts/setup.sh installs them): skipping the arm64 runs`,
  );
}
const test = (name: string, fn: () => Promise<void>, ignore = false) =>
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });

let built: Promise<string> | undefined;
/** The folder holding the release: built once for this file (linux-arm64 and darwin-arm64). */
function release(): Promise<string> {
  built ??= (async () => {
    if (process.env.CODEMODE_E2E_RELEASE_DIR) return process.env.CODEMODE_E2E_RELEASE_DIR;
    const out = tempDir("codemode-release-");
    const ran = await runCommand(
      ["bash", "scripts/release.sh", "--platform", "linux-arm64", "--platform", "darwin-arm64", "--out", out],
      { env: { ...process.env } as Record<string, string>, cwd: ROOT, timeoutMs: 900_000 },
    );
    assert.equal(ran.code, 0, ran.stderr);
    console.log(`release.sh linux-arm64 darwin-arm64: ${(ran.ms / 1000).toFixed(0)} s`);
    return out;
  })();
  return built;
}

const binaryName = (platform: string) => `codemode-${VERSION}-${platform}`;

/** The first `length` bytes of a file (the binaries are ~150 MiB: headers are all a check needs). */
function head(path: string, length = 1 << 16): Buffer {
  const fd = openSync(path, "r");
  try {
    const buffer = Buffer.alloc(length);
    return buffer.subarray(0, readSync(fd, buffer, 0, length, 0));
  } finally {
    closeSync(fd);
  }
}

test("SHA256SUMS lists every binary built, with its digest", async () => {
  const dir = await release();
  const lines = readFileSync(join(dir, "SHA256SUMS"), "utf8").trim().split("\n");
  const listed = new Map(lines.map((line) => {
    const [digest, name] = line.split(/\s+\*?/);
    return [name, digest] as const;
  }));
  const binaries = readdirSync(dir).filter((name) => name.startsWith(`codemode-${VERSION}-`)).sort();
  assert.deepEqual([...listed.keys()].sort(), binaries);
  assert.ok([...listed.values()].every((digest) => /^[0-9a-f]{64}$/.test(digest)));
  // Checked the way a user checks them.
  const check = spawnSync("sha256sum", ["-c", "SHA256SUMS"], { cwd: dir, encoding: "utf8" });
  assert.equal(check.status, 0, check.stdout + check.stderr);
});

/** The CPU a Mach-O 64-bit executable is for, and whether it has a code signature; throws if not one. */
function machO(path: string): { cpu: "arm64" | "x64"; signed: boolean } {
  const bytes = head(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  assert.equal(view.getUint32(0, true), 0xfeedfacf, `${path} is not a 64-bit Mach-O file`);
  const cpus: Record<number, "arm64" | "x64"> = { 0x0100000c: "arm64", 0x01000007: "x64" };
  const cpu = cpus[view.getUint32(4, true)];
  assert.ok(cpu, `${path}: unknown CPU type`);
  assert.equal(view.getUint32(12, true), 2, `${path} is not an executable (MH_EXECUTE)`);
  let at = 32;
  let signed = false;
  for (let i = 0; i < view.getUint32(16, true); i++) {
    if (view.getUint32(at, true) === 0x1d) signed = true; // LC_CODE_SIGNATURE
    at += view.getUint32(at + 4, true);
  }
  return { cpu, signed };
}

test("the darwin binaries are 64-bit Mach-O executables for their CPU, signed, of a release's size", async () => {
  const dir = await release();
  const darwin = readdirSync(dir).filter((name) => name.startsWith(binaryName("darwin")));
  assert.ok(darwin.length > 0, "no darwin binary was built");
  for (const name of darwin) {
    const { cpu, signed } = machO(join(dir, name));
    assert.equal(`darwin-${cpu}`, name.slice(binaryName("").length));
    assert.ok(signed, `${name} has no code signature`);
    const mib = statSync(join(dir, name)).size / 2 ** 20;
    assert.ok(mib > 100 && mib < 250, `${name} is ${mib.toFixed(0)} MiB`);
  }
});

/** The arm64 binary's embed manifest, as the build wrote it. */
function arm64Manifest(): EmbedManifest {
  return JSON.parse(readFileSync(join(ROOT, "dist", "embed", "linux-arm64", "manifest.json"), "utf8"));
}

/** A fresh HOME and PATH (coreutils, and podman when it has the image) for the arm64 binary. */
function arm64User(): { home: string; env: Record<string, string> } {
  const home = tempDir("codemode-arm64-home-");
  const coreutils = makeCoreutilsDir("codemode-arm64-path-");
  const image = spawnSync("podman", ["image", "exists", "codemode-sandbox:latest"]).status === 0;
  return {
    home,
    env: { PATH: [coreutils, ...(image ? [podmanOnlyPath()] : [])].join(":"), HOME: home, LANG: "C.UTF-8" },
  };
}

const underQemu = (binary: string, args: string[]) => [QEMU, "-L", SYSROOT, binary, ...args];

test("the linux-arm64 binary under qemu-user: --version, and doctor unpacks its arm64 runtime", async () => {
  if (!haveQemu) return;
  const dir = await release();
  const binary = join(dir, binaryName("linux-arm64"));
  const elf = head(binary, 20);
  assert.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], "not an ELF file");
  assert.equal(elf.readUInt16LE(18), 183, "not an aarch64 executable");
  const user = arm64User();
  const version = await runCommand(underQemu(binary, ["--version"]), { env: user.env, cwd: user.home });
  assert.equal(version.code, 0, version.stderr);
  assert.equal(version.stdout.trim(), `${VERSION} (binary, linux-arm64)`);

  const started = performance.now();
  const doctor = await runCommand(underQemu(binary, ["doctor", "--quick", "--json"]), {
    env: user.env,
    cwd: user.home,
    timeoutMs: 600_000,
  });
  console.log(
    `arm64 doctor --quick --json under qemu: ${((performance.now() - started) / 1000).toFixed(0)} s`,
  );
  const report = JSON.parse(doctor.stdout);
  assert.equal(report.install, "binary");
  const manifest = arm64Manifest();
  const pyodideCheck = report.runtimes.find((r: { name: string }) => r.name === "pyodide");
  assert.equal(pyodideCheck.version, `${manifest.pyodide} (deno ${manifest.deno}, embedded)`);
  // The binary cannot start the arm64 Deno it unpacked: the kernel hands an aarch64 child to qemu only
  // through binfmt. Anything else going wrong fails here.
  assert.match(
    pyodideCheck.sandbox?.error ?? "",
    /exit code 127|exec format error/i,
    JSON.stringify(pyodideCheck),
  );
  const podmanCheck = report.runtimes.find((r: { name: string }) => r.name === "podman");
  if (podmanCheck.installed) {
    // Podman is this machine's own: the emulated binary drives a real container with it.
    assert.equal(report.runtime, "podman", JSON.stringify(podmanCheck));
    assert.equal(podmanCheck.sandbox?.ok, true, JSON.stringify(podmanCheck));
  }
  // What it unpacked is the arm64 Deno it carries, byte for byte.
  const deno = join(user.home, ".local", "state", "codemode", "deno", `${manifest.deno}-linux-arm64`, "deno");
  assert.equal(sha256File(deno), manifest.files.deno.sha256);
  assert.equal(head(deno, 20).readUInt16LE(18), 183);
});

test(
  "the arm64 binary's Deno and Pyodide, unpacked by it, answer print(6*7) under qemu-user",
  async () => {
    const dir = await release();
    const user = arm64User();
    const ran = await runCommand(
      underQemu(join(dir, binaryName("linux-arm64")), ["doctor", "--quick", "--json"]),
      {
        env: user.env,
        cwd: user.home,
        timeoutMs: 600_000,
      },
    );
    assert.ok(ran.stdout.includes('"pyodide"'), ran.stderr);
    const manifest = arm64Manifest();
    const state = join(user.home, ".local", "state", "codemode");
    // The host session starts the carried Deno through qemu, as binfmt would.
    const wrapper = join(user.home, "deno-arm64");
    writeFileSync(
      wrapper,
      `#!/bin/sh\nexec ${QEMU} -L ${SYSROOT} ${state}/deno/${manifest.deno}-linux-arm64/deno "$@"\n`,
      { mode: 0o755 },
    );
    mkdirSync(join(user.home, "session"));
    const runtime = pyodide({
      deno: wrapper,
      assetDir: join(state, "pyodide", manifest.pyodide),
      stateDir: join(user.home, "session"),
      preload: SANDBOX_RUNTIME,
      snapshotTimeoutMs: 1_800_000,
    });
    assert.equal((await runtime.detect()).version, `${manifest.pyodide} (deno ${manifest.deno})`);
    const session = new SandboxSession({
      runtime,
      sandbox: pyodideStart("codemode-arm64"),
      bootstrap: bootstrapFrame({ max_output: 1 << 20, servers: [] }),
      rpc: echoRpc,
      maxOutput: 1 << 20,
      startTimeoutMs: 1_800_000,
    });
    const started = performance.now();
    try {
      await session.start();
      const ready = performance.now();
      const result = await session.execute("print(6*7)", { timeout: 1_800 });
      assert.equal(result.status, "ok", result.error);
      assert.equal(result.stdout, "42\n");
      console.log(
        `arm64 Pyodide under qemu: ready in ${((ready - started) / 1000).toFixed(0)} s, ` +
          `print(6*7) in ${((performance.now() - ready) / 1000).toFixed(0)} s`,
      );
    } finally {
      await session.close();
    }
  },
  !haveQemu || process.env.CODEMODE_E2E_QEMU_PYODIDE !== "1",
);
