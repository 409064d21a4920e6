/**
 * The npm package (issue 27), as a user with only Node.js and npm meets it: the tarball `npm pack` makes
 * is installed globally into a throwaway prefix and HOME, with PATH reduced to node, npm, sh and
 * coreutils, and no checkout or node_modules in reach. `codemode --version`, `doctor --json` and `serve`
 * under the MCP SDK's stdio client answer `print(6*7)` on the embedded Pyodide runtime, then on podman
 * once it is on PATH with the image present; `npx -y ./codemode-<v>.tgz serve` answers on its first and
 * its cached run. A result that breaks its tool's outputSchema is refused (the package ships the
 * result-validation worker). Nothing is written into the installed package meanwhile.
 * @module
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { VERSION } from "../../core/version.ts";
import {
  changes,
  childPids,
  connectServe,
  eventually,
  listing,
  NPM_CACHE,
  type NpmUser,
  npmUser,
  packTarball,
  podmanOnlyPath,
  ROOT,
  runCommand,
  runPython,
  tempDir,
} from "./_npm.ts";
import { JS } from "../integration/_pyodide_attempts.ts";

const IMAGE = "codemode-sandbox:latest";
const HOSTILE = join(ROOT, "tests", "testdata", "servers", "hostile_server.ts");
const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });

let tarball: Promise<{ path: string; ms: number }> | undefined;
/** The tarball, packed once for the whole file. */
function packed(): Promise<{ path: string; ms: number }> {
  tarball ??= packTarball().then((t) => {
    console.log(
      `npm pack: ${(t.ms / 1000).toFixed(1)} s, ${(Deno.statSync(t.path).size / 2 ** 20).toFixed(1)} MiB`,
    );
    return t;
  });
  return tarball;
}

/** `npm i -g` of the tarball into the user's prefix; returns the installed package's folder. */
async function installGlobally(user: NpmUser, path: string): Promise<string> {
  const ran = await runCommand(
    [
      "npm",
      "install",
      "--global",
      "--prefix",
      user.prefix,
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      path,
    ],
    { env: user.env, cwd: user.cwd, timeoutMs: 600_000 },
  );
  assert.equal(ran.code, 0, ran.stderr);
  // Every dependency supports the Node.js the README names (commander 15 would not: Node >= 22.12).
  assert.doesNotMatch(ran.stderr, /EBADENGINE/);
  console.log(`npm i -g from the cache: ${(ran.ms / 1000).toFixed(1)} s`);
  return join(user.prefix, "lib", "node_modules", "codemode");
}

test("npm i -g of the packed tarball: --version, doctor and serve on Pyodide, then on podman", async () => {
  const { path } = await packed();
  const user = npmUser();
  for (const name of ["deno", "bun", "podman", "docker", "python3"]) {
    assert.notEqual(
      spawnSync("sh", ["-c", `command -v ${name}`], { env: user.env }).status,
      0,
      `${name} on PATH`,
    );
  }
  const pkg = await installGlobally(user, path);
  // What runs is JavaScript and the launcher: no TypeScript, no checkout.
  assert.deepEqual(
    readdirSync(pkg).sort(),
    ["LICENSE", "README.md", "bin", "dist", "node_modules", "package.json", "sandbox"],
  );
  assert.ok(!existsSync(join(pkg, "cli.ts")));
  assert.ok(existsSync(join(pkg, "node_modules", "pyodide", "pyodide.asm.wasm")), "pyodide is a dependency");
  const installed = listing(pkg);
  const codemode = join(user.prefix, "bin", "codemode");

  const version = await runCommand([codemode, "--version"], { env: user.env, cwd: user.cwd });
  assert.equal(version.code, 0, version.stderr);
  assert.equal(version.stdout.trim(), `${VERSION} (npm)`);

  const doctor = await runCommand([codemode, "doctor", "--json"], { env: user.env, cwd: user.cwd });
  const report = JSON.parse(doctor.stdout);
  assert.equal(report.install, "npm");
  assert.equal(report.runtime, "pyodide", doctor.stdout);
  const pyodide = report.runtimes.find((r: { name: string }) => r.name === "pyodide");
  assert.equal(pyodide.sandbox?.ok, true, JSON.stringify(pyodide));
  assert.equal(doctor.code, 0, JSON.stringify(report.findings));

  // The Pyodide start-up snapshot came with the package: the state directory holds a copy, none was made.
  const shipped = join(pkg, "dist", "npm", "pyodide");
  const [pyodideVersion] = readdirSync(shipped);
  const cache = join(user.home, ".local", "state", "codemode", "pyodide", pyodideVersion);
  const snapshots = (dir: string) => readdirSync(dir).filter((f) => f.startsWith("snapshot-")).sort();
  assert.deepEqual(snapshots(cache), snapshots(join(shipped, pyodideVersion)));

  // An upstream server whose tool declares an outputSchema its result breaks (the checkout's test server).
  mkdirSync(join(user.home, "MCPs"));
  writeFileSync(
    join(user.home, "MCPs", "servers.json"),
    JSON.stringify({
      mcpServers: {
        hostile: {
          command: join(ROOT, "node_modules", ".bin", "deno"),
          args: ["run", "-A", HOSTILE, "--redos"],
        },
      },
    }),
  );
  const serve = await connectServe([codemode, "serve"], user, { CODEMODE_LOG_LEVEL: "info" });
  try {
    const answer = await runPython(serve.client, "print(6*7)");
    assert.equal(answer.isError, false, answer.text + serve.stderr());
    assert.equal(answer.text.trim(), "42");
    // The result-validation worker came with the package (a worker that fails to start lets every
    // result through): the broken result is refused.
    const refused = await runPython(
      serve.client,
      `try:\n    await mcp_hostile.redos_match(n=3)\n    print("passed")\nexcept Exception as e:\n    print(e)`,
    );
    assert.match(refused.text, /does not match the tool's outputSchema/, refused.text + serve.stderr());
    // The installed package is no more readable from the sandbox than any other host folder.
    for (
      const target of [join(pkg, "package.json"), join(pkg, "dist", "npm", "codemode.js"), join(pkg, "bin")]
    ) {
      const read = await runPython(serve.client, `${JS}js.Deno.readFileSync('${target}')`);
      assert.equal(read.isError, true, `read ${target}: ${read.text}`);
      assert.match(read.text, /Requires read access/);
    }
    const write = await runPython(serve.client, `${JS}js.Deno.writeTextFileSync('${pkg}/pwned', 'x')`);
    assert.match(write.text, /Requires write access/);
  } finally {
    await serve.client.close();
  }
  assert.match(serve.stderr(), /"selected runtime","runtime":"pyodide"/);

  // The same install, once podman is on PATH and has the image: the container runtime is chosen.
  if (spawnSync("podman", ["image", "exists", IMAGE]).status !== 0) {
    console.error(`!! podman or the image ${IMAGE} is missing: skipping the podman half`);
  } else {
    const withPodman = { ...user, env: { ...user.env, PATH: `${user.env.PATH}:${podmanOnlyPath()}` } };
    const podmanDoctor = await runCommand([codemode, "doctor", "--json"], {
      env: withPodman.env,
      cwd: user.cwd,
    });
    const podmanReport = JSON.parse(podmanDoctor.stdout);
    const podmanCheck = podmanReport.runtimes.find((r: { name: string }) => r.name === "podman");
    assert.equal(podmanReport.runtime, "podman", JSON.stringify(podmanCheck) + podmanDoctor.stderr);
    const served = await connectServe([codemode, "serve"], withPodman, { CODEMODE_LOG_LEVEL: "info" });
    // The launcher is Node; the serve (and the sandbox's owner) is the Deno it started.
    const [serving] = childPids(served.pid);
    const owned = () =>
      spawnSync("podman", ["ps", "-a", "-q", "--filter", `label=codemode.owner-pid=${serving}`], {
        encoding: "utf8",
      }).stdout.trim();
    try {
      const answer = await runPython(served.client, "print(6*7)");
      assert.equal(answer.isError, false, answer.text + served.stderr());
      assert.equal(answer.text.trim(), "42");
      assert.notEqual(owned(), "", `no container is labelled with the serve's pid ${serving}`);
      // An MCP client stopping the server signals the launcher: Deno gets it and removes its sandbox.
      process.kill(served.pid, "SIGTERM");
      assert.ok(
        await eventually(() => !existsSync(`/proc/${serving}`), 60_000),
        "the serve outlived SIGTERM",
      );
    } finally {
      await served.client.close();
    }
    assert.match(served.stderr(), /"selected runtime","runtime":"podman"/);
    assert.equal(owned(), "", "the serve left a container behind");
  }

  assert.deepEqual(changes(installed, listing(pkg)), [], "something wrote into the installed package");
});

/** The folders npx installed the tarball at `path` into (under npm's cache, `_npx/<hash>/`). */
function npxInstalls(path: string): string[] {
  // npx records the tarball by its path in the folder's package.json.
  const root = join(NPM_CACHE, "_npx");
  if (!existsSync(root)) return [];
  return readdirSync(root).map((hash) => join(root, hash)).filter((dir) => {
    try {
      return readFileSync(join(dir, "package.json"), "utf8").includes(path);
    } catch {
      return false;
    }
  });
}

test("npx -y ./codemode-<v>.tgz serve answers print(6*7), first and cached run", async () => {
  const { path } = await packed();
  const user = npmUser();
  // npx runs from the folder holding the tarball, as a user who downloaded it would; a copy with a name
  // of its own keeps this test's npx install apart from any other.
  const name = `codemode-${VERSION}.tgz`;
  const folder = tempDir("codemode-npx-");
  copyFileSync(path, join(folder, name));
  const local = { ...user, cwd: folder };
  try {
    const times: number[] = [];
    for (const run of ["first", "cached"]) {
      const started = performance.now();
      const serve = await connectServe(["npx", "-y", `./${name}`, "serve"], local);
      try {
        const answer = await runPython(serve.client, "print(6*7)");
        assert.equal(answer.isError, false, `${run}: ${answer.text}${serve.stderr()}`);
        assert.equal(answer.text.trim(), "42");
      } finally {
        await serve.client.close();
      }
      times.push(performance.now() - started);
    }
    console.log(
      `npx -y first answer: first ${(times[0] / 1000).toFixed(1)} s, cached ${
        (times[1] / 1000).toFixed(1)
      } s`,
    );
  } finally {
    for (const dir of npxInstalls(folder)) rmSync(dir, { recursive: true, force: true });
  }
});
