/**
 * Prepares what the compiled binary carries for its embedded runtime, in dist/embed/<target>/
 * (scripts/compile.sh runs it before `bun build`, one folder per platform so builds for several never
 * share one):
 *
 * - `deno.zst`: the Deno executable of the target platform (npm `@deno/<platform>`), zstd-compressed;
 * - the six Pyodide files (`<name>.zst`), the host program (`host.mjs`) and the start-up snapshot made
 *   from them (`snapshot.bin.zst`, see scripts/pyodide_snapshot.ts);
 * - `manifest.json`: the target, the versions, and each file's SHA-256 and size once unpacked, which the
 *   binary checks before it runs anything it unpacked;
 * - `entry.ts`: the binary's entry point, which imports each of these files (Bun compiles them in) and
 *   hands them to scripts/compile_entry.ts; generated from the manifest, so it names every file.
 *
 * Inputs that did not change since the last run are not compressed again. Another platform's Deno is
 * looked for in `node_modules/@deno/<package>`, then under each `--packages DIR` (scripts/release.sh
 * fetches them there).
 *
 *   deno run -A scripts/embed_runtime.ts [--target linux-x64] [--packages DIR]
 * @module
 */
import { createReadStream, createWriteStream, existsSync, readFileSync, statSync } from "node:fs";
import { copyFile, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { pipeline } from "node:stream/promises";
import { constants, createZstdCompress } from "node:zlib";
import process from "node:process";
import { PYODIDE_FILES } from "../plugins/runtime/_pyodide_files.ts";
import type { EmbedManifest, ManifestFile } from "../plugins/runtime/_pyodide_embedded.ts";
import { sha256File } from "../plugins/runtime/_unpack.ts";
import { prebuildSnapshot } from "./pyodide_snapshot.ts";

const ROOT = resolve(new URL("..", import.meta.url).pathname);
/** Where the files for `target` go; the entry.ts written there imports them. */
export function embedDir(target = hostTarget()): string {
  return join(ROOT, "dist", "embed", target);
}
/** zstd level: 9 gets the Deno executable to 34.6 MiB in ~4 s of CPU; 19 to 31.0 MiB in ~90 s. */
const LEVEL = 9;

/** The npm package holding Deno for each target codemode can be compiled for. */
export const DENO_PACKAGES: Record<string, { pkg: string; exe: string }> = {
  "linux-x64": { pkg: "@deno/linux-x64-glibc", exe: "deno" },
  "linux-arm64": { pkg: "@deno/linux-arm64-glibc", exe: "deno" },
  "darwin-x64": { pkg: "@deno/darwin-x64", exe: "deno" },
  "darwin-arm64": { pkg: "@deno/darwin-arm64", exe: "deno" },
};

/** The platform this machine is, as a target name. */
export function hostTarget(): string {
  return `${process.platform}-${process.arch}`;
}

interface Input {
  key: string;
  path: string;
  dir: ManifestFile["dir"];
  name: string;
  mode: number;
  /** File name in dist/embed/. */
  out: string;
  compress: boolean;
}

/**
 * Writes dist/embed/<target>/ for `target`, taking its Deno from node_modules or one of `packages` (each
 * a folder holding `@deno/<package>/`); returns the manifest.
 */
export async function embedRuntime(target = hostTarget(), packages: string[] = []): Promise<EmbedManifest> {
  const deno = DENO_PACKAGES[target];
  if (!deno) {
    throw new Error(`Unknown target "${target}": choose one of ${Object.keys(DENO_PACKAGES).join(", ")}`);
  }
  const candidates = [join(ROOT, "node_modules"), ...packages].map((dir) => join(dir, deno.pkg));
  const denoDir = candidates.find((dir) => existsSync(join(dir, deno.exe)));
  if (!denoDir) {
    const version = JSON.parse(readFileSync(join(ROOT, "node_modules/deno/package.json"), "utf8")).version;
    throw new Error(
      `The Deno executable for ${target} is missing (looked in "${candidates.join('", "')}"); npm installs ` +
        `only this machine's. scripts/release.sh fetches the others (npm pack ${deno.pkg}@${version})`,
    );
  }
  const denoExe = join(denoDir, deno.exe);
  const denoVersion = JSON.parse(readFileSync(join(denoDir, "package.json"), "utf8")).version as string;
  const prebuilt = await prebuildSnapshot();
  const assets = join(ROOT, "node_modules", "pyodide");
  const inputs: Input[] = [
    { key: "deno", path: denoExe, dir: "deno", name: deno.exe, mode: 0o700, out: "deno.zst", compress: true },
    ...PYODIDE_FILES.map((file): Input => ({
      key: file,
      path: join(assets, file),
      dir: "pyodide",
      name: file,
      mode: 0o600,
      out: `${file}.zst`,
      compress: true,
    })),
    {
      key: "host",
      path: prebuilt.program,
      dir: "pyodide",
      name: basename(prebuilt.program),
      mode: 0o600,
      out: "host.mjs",
      compress: false,
    },
    {
      key: "snapshot",
      path: prebuilt.snapshot,
      dir: "pyodide",
      name: basename(prebuilt.snapshot),
      mode: 0o600,
      out: "snapshot.bin.zst",
      compress: true,
    },
  ];
  const dir = embedDir(target);
  await mkdir(dir, { recursive: true });
  const previous = readManifest(dir);
  const files: Record<string, ManifestFile> = {};
  for (const input of inputs) {
    const file: ManifestFile = {
      dir: input.dir,
      name: input.name,
      mode: input.mode,
      encoding: input.compress ? "zstd" : "identity",
      sha256: sha256File(input.path),
      size: statSync(input.path).size,
    };
    const out = join(dir, input.out);
    const same = previous?.files[input.key];
    const unchanged = same && same.sha256 === file.sha256 && same.encoding === file.encoding &&
      existsSync(out);
    if (!unchanged) await write(input.path, out, input.compress);
    files[input.key] = file;
  }
  const manifest: EmbedManifest = { target, deno: denoVersion, pyodide: prebuilt.version, files };
  await writeFile(join(dir, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  await writeFile(join(dir, "entry.ts"), entrySource(target, inputs));
  return manifest;
}

/** The binary's entry point for `target`: every carried file imported, handed to compile_entry.ts. */
function entrySource(target: string, inputs: Input[]): string {
  const lines = [
    `// Generated by scripts/embed_runtime.ts: the compiled binary's entry point for ${target}.`,
    "// Bun compiles each file in and gives its path; scripts/compile_entry.ts starts codemode with them.",
    'import manifest from "./manifest.json" with { type: "json" };',
    ...inputs.map((input, i) => `import file${i} from "./${input.out}" with { type: "file" };`),
    'import { startBinary } from "../../../scripts/compile_entry.ts";',
    "",
    "await startBinary(manifest, {",
    ...inputs.map((input, i) => `  ${JSON.stringify(input.key)}: file${i},`),
    "});",
    "",
  ];
  return lines.join("\n");
}

function readManifest(dir: string): EmbedManifest | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
  } catch {
    return undefined;
  }
}

async function write(from: string, to: string, compress: boolean): Promise<void> {
  const temp = `${to}.${process.pid}.tmp`;
  try {
    if (compress) {
      const zstd = createZstdCompress({ params: { [constants.ZSTD_c_compressionLevel]: LEVEL } });
      await pipeline(createReadStream(from), zstd, createWriteStream(temp));
    } else {
      await copyFile(from, temp);
    }
    await rename(temp, to);
  } finally {
    await rm(temp, { force: true });
  }
}

if (import.meta.main) {
  const at = process.argv.indexOf("--target");
  const target = at >= 0 ? process.argv[at + 1] : hostTarget();
  const packages = process.argv.flatMap((arg, i) => process.argv[i - 1] === "--packages" ? [arg] : []);
  try {
    const started = performance.now();
    const manifest = await embedRuntime(target, packages);
    const mib = (name: string) => statSync(join(embedDir(target), name)).size / 2 ** 20;
    const carried = ["deno.zst", "snapshot.bin.zst", "host.mjs", ...PYODIDE_FILES.map((f) => `${f}.zst`)]
      .reduce((sum, name) => sum + mib(name), 0);
    console.error(
      `embed_runtime: ${manifest.target}, deno ${manifest.deno}, pyodide ${manifest.pyodide}: ` +
        `${carried.toFixed(1)} MiB to embed (deno ${mib("deno.zst").toFixed(1)} MiB, snapshot ` +
        `${mib("snapshot.bin.zst").toFixed(1)} MiB) in ${
          ((performance.now() - started) / 1000).toFixed(1)
        } s`,
    );
  } catch (error) {
    console.error(`embed_runtime: ${(error as Error).message}`);
    process.exit(1);
  }
}
