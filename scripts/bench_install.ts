/**
 * Section "install" (issue 27): the npm package as a user with only Node.js and npm meets it.
 *
 * - the tarball `npm pack` makes and what it unpacks to, against the release binary for this platform;
 * - `npm i -g` of the tarball into a fresh prefix from npm's cache, against `npm i -g deno` alone (the
 *   biggest dependency) with the same flags;
 * - the first answer of a fresh HOME's `serve` (spawn, initialize, `print(6*7)` answered on Pyodide):
 *   `npx -y ./codemode-<v>.tgz` on its first run (npx installs from npm's cache; a cold npm cache needs
 *   the registry, so it is not measured) and cached, and the global install, against the binary;
 * - `--version` through the launcher (Node starting Deno) against the binary's, and the two designs the
 *   launcher chose between: Deno running the bundle without the launcher, and Node running the bundle
 *   (which answers `--version` but cannot run codemode on Node 20: the note says why).
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { BINARY, exec, ROOT, row, type SectionResult } from "./bench_harness.ts";
import { hyperfine } from "./bench_startup.ts";
import {
  connectServe,
  NPM_CACHE,
  type NpmUser,
  npmUser,
  packTarball,
  runCommand,
  runPython,
  tempDir,
} from "../tests/e2e/_npm.ts";
import { makeCoreutilsDir } from "../tests/e2e/_coreutils.ts";

/** Repetitions of each install and first answer. */
export const counts = { installs: 3, answers: 3 };

const mib = (bytes: number) => bytes / 2 ** 20;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** `npm i -g <spec>` into a fresh prefix; milliseconds. */
async function installInto(user: NpmUser, spec: string): Promise<number> {
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
      spec,
    ],
    { env: user.env, cwd: user.cwd, timeoutMs: 600_000 },
  );
  if (ran.code !== 0) throw new Error(`npm i -g ${spec} failed: ${ran.stderr.slice(-500)}`);
  return ran.ms;
}

/** Spawn to `print(6*7)` answered, for a fresh `serve` started by `command`; milliseconds. */
async function firstAnswer(command: string[], user: NpmUser): Promise<number> {
  const started = performance.now();
  const { client } = await connectServe(command, user);
  try {
    const answer = await runPython(client, "print(6*7)");
    if (answer.text.trim() !== "42") throw new Error(`unexpected answer: ${answer.text}`);
    return performance.now() - started;
  } finally {
    await client.close();
  }
}

/** Removes the npx installs of tarballs under `folder` from npm's cache. */
function forgetNpx(folder: string): void {
  const root = join(NPM_CACHE, "_npx");
  if (!existsSync(root)) return;
  for (const hash of readdirSync(root)) {
    const manifest = join(root, hash, "package.json");
    if (existsSync(manifest) && readFileSync(manifest, "utf8").includes(folder)) {
      spawnSync("rm", ["-rf", join(root, hash)]);
    }
  }
}

/** Runs the install section. */
export async function benchInstall(): Promise<SectionResult> {
  const result: SectionResult = { name: "install", rows: [], notes: [] };
  if (!existsSync(BINARY)) {
    result.skipped = `${BINARY} is missing: build it with deno task compile`;
    return result;
  }
  const tarball = await packTarball();
  const binaryBytes = statSync(BINARY).size;
  const listing = await exec("tar", ["tzvf", tarball.path]);
  const unpacked = listing.stdout.split("\n").filter(Boolean)
    .reduce((sum, line) => sum + Number(line.split(/\s+/)[2] ?? 0), 0);
  const binaryBaseline = { label: "the release binary for this platform", value: mib(binaryBytes) };
  result.rows.push(row({
    section: "install",
    metric: "npm package tarball",
    value: mib(statSync(tarball.path).size),
    unit: "MiB",
    baseline: binaryBaseline,
    note: `npm pack took ${(tarball.ms / 1000).toFixed(1)} s (bundle and snapshot included)`,
  }));
  result.rows.push(row({
    section: "install",
    metric: "npm package unpacked (its own files)",
    value: mib(unpacked),
    unit: "MiB",
    baseline: binaryBaseline,
    note: "of which the Pyodide start-up snapshot is most; Deno and Pyodide come as dependencies",
  }));

  // Installs from npm's cache: the package and, as the baseline, its biggest dependency alone.
  const denoVersion = JSON.parse(readFileSync(join(ROOT, "node_modules/deno/package.json"), "utf8")).version;
  const ours: number[] = [];
  const denoOnly: number[] = [];
  let installed: NpmUser | undefined;
  await installInto(npmUser(), tarball.path); // fills the cache with every dependency first
  for (let i = 0; i < counts.installs; i++) {
    const user = npmUser();
    ours.push(await installInto(user, tarball.path));
    installed ??= user;
    denoOnly.push(await installInto(npmUser(), `deno@${denoVersion}`));
  }
  const prefixBytes = Number((await exec("du", ["-sb", installed!.prefix])).stdout.split(/\s/)[0]);
  result.rows.push(row({
    section: "install",
    metric: `npm i -g of the tarball from npm's cache, median of ${counts.installs}`,
    value: median(ours),
    unit: "ms",
    baseline: { label: `npm i -g deno@${denoVersion} alone, same flags (median)`, value: median(denoOnly) },
    note: `all: ${ours.map((ms) => ms.toFixed(0)).join(", ")} ms; installed prefix ${
      mib(prefixBytes).toFixed(0)
    } MiB`,
  }));

  // First answers with a fresh HOME, all on the Pyodide runtime (no engine on PATH).
  const folder = tempDir("codemode-bench-npx-");
  spawnSync("cp", [tarball.path, folder]);
  const name = tarball.path.split("/").pop()!;
  const npx = ["npx", "-y", `./${name}`, "serve"];
  try {
    const npxUser = () => ({ ...npmUser(), cwd: folder });
    const npxFirst: number[] = [];
    for (let i = 0; i < counts.answers; i++) {
      forgetNpx(folder);
      npxFirst.push(await firstAnswer(npx, npxUser()));
    }
    const npxCached: number[] = [];
    for (let i = 0; i < counts.answers; i++) npxCached.push(await firstAnswer(npx, npxUser()));
    // What npx itself costs on a cached run, against the same launcher started directly.
    const npxVersion: number[] = [];
    const launcherVersion: number[] = [];
    for (let i = 0; i < counts.answers; i++) {
      const user = npxUser();
      npxVersion.push((await runCommand(["npx", "-y", `./${name}`, "--version"], user)).ms);
      const launcher = join(installed!.prefix, "bin", "codemode");
      launcherVersion.push((await runCommand([launcher, "--version"], { ...user, cwd: user.home })).ms);
    }
    result.rows.push(row({
      section: "install",
      metric: `npx -y ./codemode-<v>.tgz --version, cached, median of ${counts.answers}`,
      value: median(npxVersion),
      unit: "ms",
      baseline: {
        label: "the globally installed launcher's --version (median)",
        value: median(launcherVersion),
      },
      note: "npx checks and links its install on every run (npm's own time)",
    }));
    const global: number[] = [];
    for (let i = 0; i < counts.answers; i++) {
      const fresh = { ...installed!, home: tempDir("codemode-bench-home-") };
      global.push(
        await firstAnswer([join(installed!.prefix, "bin", "codemode"), "serve"], {
          ...fresh,
          env: { ...fresh.env, HOME: fresh.home },
        }),
      );
    }
    const bare = makeCoreutilsDir("codemode-bench-bare-");
    const binary: number[] = [];
    for (let i = 0; i < counts.answers; i++) {
      const home = tempDir("codemode-bench-home-");
      binary.push(
        await firstAnswer([BINARY, "serve"], {
          home,
          cwd: home,
          prefix: home,
          env: { PATH: bare, HOME: home, LANG: "C.UTF-8" },
        }),
      );
    }
    const baseline = { label: "the binary, fresh HOME (median)", value: median(binary) };
    const all = (values: number[]) => `all: ${values.map((ms) => ms.toFixed(0)).join(", ")} ms`;
    for (
      const [metric, values] of [
        ["npx -y ./codemode-<v>.tgz serve, first run (installs from the cache)", npxFirst],
        ["npx -y ./codemode-<v>.tgz serve, cached", npxCached],
        ["global install: codemode serve", global],
      ] as const
    ) {
      result.rows.push(row({
        section: "install",
        metric: `${metric}: spawn to print(6*7) answered, fresh HOME, median of ${counts.answers}`,
        value: median([...values]),
        unit: "ms",
        baseline,
        note: all([...values]),
      }));
    }
  } finally {
    forgetNpx(folder);
  }

  // --version: the launcher against the binary, and the designs behind the launcher.
  const pkg = join(installed!.prefix, "lib", "node_modules", "codemode");
  const bundle = join(pkg, "dist", "npm", "codemode.js");
  const deno = join(pkg, "node_modules", "deno", "deno");
  const flags = "run -A --quiet --no-config --no-lock --node-modules-dir=manual";
  const [launcher, denoBundle, nodeBundle, bin] = await hyperfine([
    `${join(installed!.prefix, "bin", "codemode")} --version`,
    `${deno} ${flags} ${bundle} --version`,
    `node ${bundle} --version`,
    `${BINARY} --version`,
  ]);
  const binBaseline = { label: "dist/codemode --version (median)", value: bin.medianMs };
  for (
    const [metric, t] of [
      ["codemode --version through the npm launcher (Node starts Deno)", launcher],
      ["Deno running the bundle, no launcher", denoBundle],
      ["Node running the bundle", nodeBundle],
    ] as const
  ) {
    result.rows.push(row({
      section: "install",
      metric: `${metric}, median`,
      value: t.medianMs,
      unit: "ms",
      baseline: binBaseline,
      note: `CPU ${t.cpuMs.toFixed(1)} ms`,
    }));
  }
  const onNode = spawnSync("node", [bundle, "doctor", "--quick", "--json"], { encoding: "utf8", cwd: pkg });
  const nodeVersion = spawnSync("node", ["--version"], { encoding: "utf8" }).stdout.trim();
  result.notes.push(
    `Node ${nodeVersion} running the bundle beyond --version: ${
      onNode.status === 0 ? "works" : (onNode.stderr.trim().split("\n").pop() ?? "").slice(0, 160)
    }; the launcher runs it on Deno, which codemode is developed and tested on and which the Pyodide ` +
      "runtime needs anyway.",
    "npm's cache is the machine's own; installs use --prefer-offline, so the registry is asked only " +
      "for what the cache lacks (nothing, after the first install).",
  );
  return result;
}
