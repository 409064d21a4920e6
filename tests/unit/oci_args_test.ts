import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasImageStore, type SandboxStartOptions } from "../../core/contracts/runtime.ts";
import { diagnose, engineEnv, parseInspectLines, parseMemory } from "../../plugins/runtime/_oci_exec.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import { nerdctl } from "../../plugins/runtime/nerdctl.ts";
import {
  buildRunArgs,
  MANAGED_LABEL,
  type OciEngine,
  type OciRunConfig,
  parseEngineInfo,
  runConfigFor,
} from "../../plugins/runtime/oci_base.ts";
import { autoRuntime, defaults as podmanDefaults, podman } from "../../plugins/runtime/podman.ts";

const start: SandboxStartOptions = {
  name: "codemode-s1",
  image: "codemode-sandbox:latest",
  command: ["python3", "-c", "print(1)"],
  limits: { memory: "512m", pids: 64 },
  labels: { "codemode.owner": "123", "codemode.session": "s1" },
};

function config(engine: OciEngine, extra: Partial<OciRunConfig> = {}): OciRunConfig {
  return {
    engine,
    init: true,
    nofile: 1024,
    nproc: 256,
    tmpfsSize: "256m",
    extraArgs: [],
    channel: false,
    ...extra,
  };
}

/** The value following `flag`, for flags given once. */
function valueOf(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
}

/** Every value given for a repeatable flag. */
function valuesOf(args: string[], flag: string): string[] {
  return args.flatMap((arg, i) => arg === flag ? [args[i + 1]] : []);
}

const TMPFS = "rw,noexec,nosuid,nodev,size=256m,mode=1777";

Deno.test("buildRunArgs() gives podman the complete hardened argument list", () => {
  const args = buildRunArgs(start, config("podman", { runtime: "runc", seccomp: "/tmp/codemode-0/s.json" }));
  assert.deepEqual(args, [
    "run",
    "-i",
    "--rm",
    "--name",
    "codemode-s1",
    "--label",
    "codemode.managed=true",
    "--label",
    "codemode.owner=123",
    "--label",
    "codemode.session=s1",
    "--pull",
    "never",
    "--network",
    "none",
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--security-opt",
    "seccomp=/tmp/codemode-0/s.json",
    "--user",
    "65534:65534",
    "--memory",
    "512m",
    "--memory-swap",
    "512m",
    "--pids-limit",
    "64",
    "--tmpfs",
    `/tmp:${TMPFS}`,
    "--tmpfs",
    `/workspace:${TMPFS}`,
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=256:256",
    "--workdir",
    "/workspace",
    "--init",
    "--runtime",
    "runc",
    "--read-only-tmpfs=false",
    "--http-proxy=false",
    "--env-host=false",
    "--log-driver",
    "none",
    "codemode-sandbox:latest",
    "python3",
    "-c",
    "print(1)",
  ]);
});

Deno.test("buildRunArgs() gives docker the same sandbox without podman-only flags", () => {
  const args = buildRunArgs(start, config("docker"));
  for (const flag of ["--read-only", "--init", "--rm", "-i"]) assert.ok(args.includes(flag), flag);
  assert.equal(valueOf(args, "--network"), "none");
  assert.equal(valueOf(args, "--cap-drop"), "ALL");
  assert.equal(valueOf(args, "--security-opt"), "no-new-privileges");
  assert.equal(valueOf(args, "--user"), "65534:65534");
  assert.equal(valueOf(args, "--memory"), "512m");
  assert.equal(valueOf(args, "--memory-swap"), "512m");
  assert.equal(valueOf(args, "--pids-limit"), "64");
  assert.equal(valueOf(args, "--workdir"), "/workspace");
  assert.equal(valueOf(args, "--log-driver"), "none");
  assert.equal(valueOf(args, "--pull"), "never");
  assert.deepEqual(valuesOf(args, "--tmpfs"), [`/tmp:${TMPFS}`, `/workspace:${TMPFS}`]);
  assert.deepEqual(valuesOf(args, "--ulimit"), ["nofile=1024:1024", "nproc=256:256"]);
  assert.equal(args.includes("--runtime"), false);
  assert.equal(
    args.some((arg) => arg.startsWith("--read-only-tmpfs") || arg.startsWith("--http-proxy")),
    false,
  );
  assert.deepEqual(args.slice(-4), ["codemode-sandbox:latest", "python3", "-c", "print(1)"]);
});

Deno.test("buildRunArgs() gives nerdctl the sandbox flags but no log driver it lacks", () => {
  const args = buildRunArgs(start, config("nerdctl", { runtime: "io.containerd.runc.v2" }));
  assert.equal(args.includes("--log-driver"), false);
  assert.equal(valueOf(args, "--runtime"), "io.containerd.runc.v2");
  assert.equal(valueOf(args, "--network"), "none");
  assert.equal(valueOf(args, "--user"), "65534:65534");
  assert.deepEqual(valuesOf(args, "--tmpfs"), [`/tmp:${TMPFS}`, `/workspace:${TMPFS}`]);
  assert.ok(args.includes("--read-only"));
  assert.ok(args.includes("--init"));
});

Deno.test("buildRunArgs() passes no environment variable into the container for any engine", () => {
  for (const engine of ["podman", "docker", "nerdctl"] as const) {
    const args = buildRunArgs(start, config(engine));
    const envFlags = args.filter((arg) =>
      arg === "-e" || arg === "--env" || arg.startsWith("--env=") || arg.startsWith("--env-file") ||
      arg === "--env-host" || arg === "--env-host=true" || arg === "--http-proxy" ||
      arg === "--http-proxy=true"
    );
    assert.deepEqual(envFlags, [], engine);
  }
});

Deno.test("buildRunArgs() gives every engine the seccomp profile, and none when the engine's default is chosen", () => {
  for (const engine of ["podman", "docker", "nerdctl"] as const) {
    const args = buildRunArgs(start, config(engine, { seccomp: "/tmp/codemode-0/seccomp-ab.json" }));
    assert.deepEqual(valuesOf(args, "--security-opt"), [
      "no-new-privileges",
      "seccomp=/tmp/codemode-0/seccomp-ab.json",
    ], engine);
    assert.deepEqual(valuesOf(buildRunArgs(start, config(engine)), "--security-opt"), ["no-new-privileges"]);
  }
  const limits = { memory: "256m", pids: 50 };
  assert.equal(runConfigFor("docker", {}, limits, true, "/p.json").seccomp, "/p.json");
  assert.equal(runConfigFor("docker", {}, limits, true).seccomp, undefined);
});

Deno.test("buildRunArgs() adds a CPU quota only when one is set", () => {
  assert.equal(buildRunArgs(start, config("docker")).includes("--cpus"), false);
  const args = buildRunArgs({ ...start, limits: { ...start.limits, cpus: "1.5" } }, config("docker"));
  assert.equal(valueOf(args, "--cpus"), "1.5");
});

Deno.test("buildRunArgs() always marks the sandbox as managed, even when the caller's labels do not", () => {
  const args = buildRunArgs(
    { ...start, labels: { [MANAGED_LABEL]: "false", "z.b": "2", "a.b": "1" } },
    config("podman"),
  );
  assert.deepEqual(valuesOf(args, "--label"), ["a.b=1", "codemode.managed=true", "z.b=2"]);
});

Deno.test("buildRunArgs() can leave out the init and add extra arguments before the image", () => {
  const args = buildRunArgs(start, config("podman", { init: false, extraArgs: ["--hostname", "box"] }));
  assert.equal(args.includes("--init"), false);
  assert.deepEqual(args.slice(-6, -3), ["--hostname", "box", "codemode-sandbox:latest"]);
});

Deno.test("buildRunArgs() caps memory with RLIMIT_DATA when given a data limit", () => {
  const args = buildRunArgs(start, config("podman", { dataLimit: 536870912 }));
  assert.deepEqual(valuesOf(args, "--ulimit"), [
    "nofile=1024:1024",
    "nproc=256:256",
    "data=536870912:536870912",
  ]);
});

Deno.test("runConfigFor() leaves nproc headroom when cgroups cap pids, and makes ulimits the cap when they cannot", () => {
  const limits = { memory: "256m", pids: 50 };
  const withCgroups = runConfigFor("podman", { runtime: "runc" }, limits, true);
  assert.equal(withCgroups.nproc, 200);
  assert.equal(withCgroups.dataLimit, undefined);
  assert.equal(withCgroups.runtime, "runc");
  assert.equal(withCgroups.nofile, 1024);
  assert.equal(withCgroups.init, true);
  const without = runConfigFor("podman", {}, limits, false);
  assert.equal(without.nproc, 50);
  assert.equal(without.dataLimit, 256 * 1024 * 1024);
  assert.equal(runConfigFor("docker", { nproc: 7, nofile: 99 }, limits, false).nproc, 7);
  assert.equal(runConfigFor("docker", { nproc: 7, nofile: 99 }, limits, false).nofile, 99);
});

Deno.test("autoRuntime() picks runc unless the cgroup hierarchy is pure v2", () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-cgroup-"));
  try {
    assert.equal(autoRuntime(dir), "runc");
    writeFileSync(join(dir, "cgroup.controllers"), "cpu memory pids\n");
    assert.equal(autoRuntime(dir), undefined);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("the podman, docker and nerdctl factories name their runtimes and manage images", () => {
  assert.equal(podmanDefaults.runtime, "auto");
  assert.deepEqual(podmanDefaults.command, ["podman"]);
  for (
    const [plugin, name] of [[podman(), "podman"], [docker(), "docker"], [nerdctl(), "nerdctl"]] as const
  ) {
    assert.equal(plugin.name, name);
    assert.ok(hasImageStore(plugin));
  }
});

Deno.test("engineEnv() keeps what the engine CLI needs and drops secrets and proxies", () => {
  const host = {
    PATH: "/usr/bin",
    HOME: "/root",
    XDG_RUNTIME_DIR: "/run/user/0",
    DOCKER_HOST: "unix:///x.sock",
    SECRET_TOKEN: "s3cret",
    AWS_SECRET_ACCESS_KEY: "k",
    http_proxy: "http://proxy:3128",
  };
  assert.deepEqual(engineEnv(host), {
    PATH: "/usr/bin",
    HOME: "/root",
    XDG_RUNTIME_DIR: "/run/user/0",
    DOCKER_HOST: "unix:///x.sock",
  });
  assert.equal(engineEnv(host, { proxies: true }).http_proxy, "http://proxy:3128");
  assert.ok(engineEnv({}).PATH.includes("/usr/bin"));
});

Deno.test("parseInspectLines() reads names and labels and skips lines that are not JSON", () => {
  const text = [
    `"/codemode-a" {"codemode.managed":"true","codemode.owner":"a,b=c"}`,
    `"codemode-b" null`,
    `Error: No such object: 123`,
    ``,
  ].join("\n");
  assert.deepEqual(parseInspectLines(text), [
    { name: "codemode-a", labels: { "codemode.managed": "true", "codemode.owner": "a,b=c" } },
    { name: "codemode-b", labels: {} },
  ]);
});

Deno.test("parseMemory() understands the engines' size syntax and rejects nonsense", () => {
  assert.equal(parseMemory("512m"), 512 * 1024 ** 2);
  assert.equal(parseMemory("1g"), 1024 ** 3);
  assert.equal(parseMemory("1.5G"), 1.5 * 1024 ** 3);
  assert.equal(parseMemory("64k"), 65536);
  assert.equal(parseMemory("100"), 100);
  assert.throws(() => parseMemory("lots"), /Invalid memory size "lots"/);
});

Deno.test("parseEngineInfo() reads version, rootless mode and whether cgroup limits apply", () => {
  const podmanInfo = JSON.stringify({
    host: { cgroupVersion: "v1", security: { rootless: true } },
    version: { Version: "4.3.1" },
  });
  assert.deepEqual(parseEngineInfo("podman", podmanInfo), {
    version: "4.3.1",
    rootless: true,
    cgroupLimits: false,
  });
  const dockerInfo = JSON.stringify({
    ServerVersion: "20.10.24",
    CgroupVersion: "1",
    SecurityOptions: ["name=seccomp"],
  });
  assert.deepEqual(parseEngineInfo("docker", dockerInfo), {
    version: "20.10.24",
    rootless: false,
    cgroupLimits: true,
  });
  const rootlessV2 = JSON.stringify({
    ServerVersion: "2.0",
    CgroupVersion: "2",
    SecurityOptions: ["name=rootless"],
  });
  assert.deepEqual(parseEngineInfo("nerdctl", rootlessV2), {
    version: "2.0",
    rootless: true,
    cgroupLimits: true,
  });
});

Deno.test("diagnose() turns the engine failures seen on real machines into fixes", () => {
  const cases: Array<[string, RegExp]> = [
    [
      "Error: crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2: OCI runtime error",
      /runc/,
    ],
    [
      "Error: runc: runc create failed: error setting rlimit type 7: operation not permitted: OCI permission denied",
      /ulimit -Hn/,
    ],
    [
      "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
      /dockerd/,
    ],
    ["Error: codemode-sandbox:latest: image not known", /codemode image build --runtime podman/],
  ];
  for (const [stderr, fix] of cases) assert.match(diagnose("podman", stderr).fix ?? "", fix, stderr);
  assert.match(diagnose("docker", "", "ENOENT").fix ?? "", /docker\.io/);
  assert.equal(diagnose("podman", "Error: something odd\n").message, `podman failed: "something odd"`);
  const late = diagnose("podman", "\nTimed out after 15000 ms");
  assert.equal(late.message, "podman did not answer within 15 s");
  assert.equal(late.transient, true, "a timeout says nothing lasting: its verdict is not cached");
  assert.equal(diagnose("podman", "Error: something odd\n").transient, undefined);
});

Deno.test("only podman hands the sandbox a direct channel fd; docker and nerdctl cannot pass one", () => {
  const limits = { memory: "512m", pids: 64 };
  assert.equal(runConfigFor("podman", {}, limits, true).channel, true);
  assert.equal(runConfigFor("podman", { directChannel: false }, limits, true).channel, false);
  assert.equal(runConfigFor("docker", {}, limits, true).channel, false);
  assert.equal(runConfigFor("nerdctl", {}, limits, true).channel, false);
  assert.equal(valueOf(buildRunArgs(start, config("podman", { channel: true })), "--preserve-fds"), "1");
  assert.ok(!buildRunArgs(start, config("podman")).includes("--preserve-fds"));
});
