/**
 * `codemode image build [--runtime R] [--tag T] [--minimal] [--from IMAGE] [--rootfs TAR] [--json]`:
 * builds the sandbox image offline from Debian packages, or pulls one, into podman, docker or nerdctl. By
 * default the image has the data-science libraries; `--minimal` builds python3 alone.
 * @module
 */
import { type Command, Option } from "commander";
import type { ImageStore, RuntimePlugin } from "../core/contracts/runtime.ts";
import type { ImageBuildEvent, ImageBuildResult } from "../core/sandbox/image_build.ts";
import { escapeControls, unguarded } from "./_terminal_guard.ts";

const ENGINES = ["podman", "docker", "nerdctl"] as const;
type Engine = typeof ENGINES[number];

/** Options of `codemode image build`, as commander parses them. */
export interface ImageBuildFlags {
  runtime?: Engine;
  tag?: string;
  minimal?: boolean;
  /** The old name of the default (kept so scripts that pass it still work). */
  dataScience?: boolean;
  from?: string;
  rootfs?: string;
  mirror?: string;
  json?: boolean;
}

/** Adds `build` to the `image` command; `setExit` receives the exit code. */
export function registerImageCommand(image: Command, setExit: (code: number) => void): void {
  image.command("build")
    .description(
      "Build the sandbox image from Debian packages (debootstrap: needs root and the machine's apt mirror, " +
        "no registry), or pull one with --from",
    )
    .addOption(
      new Option("--runtime <name>", "container engine (default: first one that works)").choices(ENGINES),
    )
    .option("--tag <ref>", "image reference to create (default: CODEMODE_IMAGE or codemode-sandbox:latest)")
    .option(
      "--minimal",
      "python3 alone (about 120 MB) instead of the default image with numpy, pandas, matplotlib, scipy, " +
        "scikit-learn, sympy and pillow (about 760 MB)",
    )
    .addOption(new Option("--data-science", "the default; kept for scripts that pass it").hideHelp())
    .option("--from <image>", "pull this image from a registry and tag it instead of building")
    .option("--rootfs <tar>", "import this root filesystem archive instead of building one")
    .option("--mirror <uri>", "Debian mirror (default: the one in /etc/apt/sources.list.d)")
    .option("--json", "print the result as JSON for scripts")
    .action(async (flags: ImageBuildFlags) => setExit(await imageBuild(flags)));
}

/** Runs `codemode image build`; returns the exit code (0 built, 1 failed, 2 contradicting flags). */
export async function imageBuild(flags: ImageBuildFlags): Promise<number> {
  const { colors } = await import("./_render.ts");
  const c = colors(process.stderr);
  if (flags.minimal && flags.dataScience) {
    process.stderr.write(`${c.red("✗")} --minimal and --data-science contradict each other: pass one\n`);
    return 2;
  }
  try {
    const { buildImage, DEFAULT_IMAGE } = await import("../core/sandbox/image_build.ts");
    const runtime = await chooseEngine(flags.runtime);
    const ref = flags.tag ?? process.env.CODEMODE_IMAGE ?? DEFAULT_IMAGE;
    const progress = await progressReporter(Boolean(process.stderr.isTTY));
    let result: ImageBuildResult;
    try {
      result = await buildImage(runtime, {
        ref,
        minimal: Boolean(flags.minimal),
        from: flags.from,
        rootfs: flags.rootfs,
        mirror: flags.mirror,
      }, { onEvent: progress.update });
    } finally {
      progress.stop();
    }
    if (flags.json) {
      process.stdout.write(JSON.stringify({ ...result, runtime: runtime.name }, null, 2) + "\n");
    } else {
      process.stderr.write(
        `${c.green("✓")} Built ${c.bold(result.ref)} for ${runtime.name} in ${result.seconds} s\n`,
      );
    }
    return 0;
  } catch (error) {
    process.stderr.write(`${c.red("✗")} ${(error as Error).message}\n`);
    return 1;
  }
}

const FACTORIES: Record<Engine, () => Promise<RuntimePlugin & ImageStore>> = {
  podman: async () => (await import("../plugins/runtime/podman.ts")).podman(),
  docker: async () => (await import("../plugins/runtime/docker.ts")).docker(),
  nerdctl: async () => (await import("../plugins/runtime/nerdctl.ts")).nerdctl(),
};

/** The named engine, else CODEMODE_RUNTIME's, else the first installed one whose daemon answers. */
async function chooseEngine(name?: Engine): Promise<RuntimePlugin & ImageStore> {
  const fromEnv = ENGINES.find((engine) => engine === process.env.CODEMODE_RUNTIME);
  const wanted = name ?? fromEnv;
  if (wanted) return await FACTORIES[wanted]();
  const reasons: string[] = [];
  for (const engine of ENGINES) {
    const runtime = await FACTORIES[engine]();
    const detection = await runtime.detect();
    if (detection.version) return runtime;
    reasons.push(`${engine}: ${detection.problems[0]?.message ?? "not available"}`);
  }
  throw new Error(
    `No container engine found (${reasons.join("; ")}): install podman or docker, or pass --runtime`,
  );
}

/** A progress bar on a terminal, plain log lines otherwise. */
async function progressReporter(tty: boolean) {
  if (!tty) {
    // One line per phase, and one per 10% within long phases, so CI logs show progress without flooding.
    let last = "";
    return {
      update(event: ImageBuildEvent) {
        const key = `${event.phase ?? event.step} ${Math.floor(event.fraction * 10)}`;
        if (key === last || event.step === "done") return;
        last = key;
        process.stderr.write(`[${Math.round(event.fraction * 100)}%] ${event.message}\n`);
      },
      stop() {},
    };
  }
  const { default: cliProgress } = await import("cli-progress");
  const bar = new cliProgress.SingleBar({
    stream: unguarded(process.stderr),
    format: "{bar} {percentage}% | {message}",
    barsize: 30,
    hideCursor: true,
    clearOnComplete: true,
    etaBuffer: 50,
  }, cliProgress.Presets.shades_classic);
  bar.start(100, 0, { message: "Starting" });
  return {
    update(event: ImageBuildEvent) {
      const width = Math.max(20, (process.stderr.columns ?? 80) - 45);
      bar.update(Math.round(event.fraction * 100), {
        message: escapeControls(event.message.slice(0, width)),
      });
    },
    stop() {
      bar.stop();
    },
  };
}
