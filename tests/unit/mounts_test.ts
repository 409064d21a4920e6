/**
 * Mounts without a sandbox: the setting's syntax and sandbox-side rules, the host-side refusals at
 * start-up (with errors naming the setting), the engines' mount arguments (nodev, nosuid, noexec on every
 * one; docker only read-only), and the copy Pyodide gets instead.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseMount, resolveMounts } from "../../core/config/mounts.ts";
import { loadSettings, resolveSettings } from "../../core/config/settings.ts";
import { parseConfigFile } from "../../core/config/file.ts";
import { buildRunArgs, mountArgs, mountProblem, type OciRunConfig } from "../../plugins/runtime/oci_base.ts";
import { copyMounts } from "../../core/sandbox/mount_copy.ts";
import { checkMounts } from "../../core/doctor/mounts.ts";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";

const base = realpathSync(mkdtempSync(join(tmpdir(), "codemode-mounts-")));
const home = join(base, "home");
const data = join(home, "data");
const state = join(home, ".local", "state", "codemode");
const config = join(home, ".config", "codemode");
for (const dir of [data, join(state, "artifacts"), config]) mkdirSync(dir, { recursive: true });
writeFileSync(join(data, "file.csv"), "a,b\n");
const env = { HOME: home };

Deno.test("parseMount() reads HOST:SANDBOX[:ro|rw], read-only unless rw is written", () => {
  assert.deepEqual(parseMount("/h:/data"), { host: "/h", target: "/data", readOnly: true });
  assert.deepEqual(parseMount("/h:/data/x:ro"), { host: "/h", target: "/data/x", readOnly: true });
  assert.deepEqual(parseMount("~/h:/mnt/h:rw"), { host: "~/h", target: "/mnt/h", readOnly: false });
  assert.deepEqual(parseMount("rel:/workspace/in"), { host: "rel", target: "/workspace/in", readOnly: true });
  assert.match(parseMount("/h") as string, /expected HOST:SANDBOX/);
  assert.match(parseMount("/h:/data:rx") as string, /unknown mode "rx"/);
  assert.match(parseMount(":/data") as string, /host path is empty/);
});

Deno.test("sandbox paths that would shadow the system or the sandbox's own folders are refused", () => {
  for (
    const target of [
      "/",
      "/usr",
      "/usr/lib/x",
      "/etc",
      "/bin",
      "/lib",
      "/proc",
      "/dev",
      "/sys",
      "/tmp",
      "/home/x",
      "/root",
    ]
  ) {
    assert.match(parseMount(`/h:${target}`) as string, /would shadow/, target);
  }
  assert.match(parseMount("/h:/workspace") as string, /not \/workspace itself/);
  assert.match(parseMount("/h:/workspace/artifacts/x") as string, /where artifacts are collected/);
  assert.match(parseMount("/h:/data/../etc") as string, /must be normalised/);
  assert.match(parseMount("/h:data") as string, /must be absolute/);
  for (const target of ["/data", "/data/sales", "/mnt", "/mnt/x/y", "/workspace/in"]) {
    assert.equal(typeof parseMount(`/h:${target}`), "object", target);
  }
});

Deno.test("start-up refuses missing paths, files, /, $HOME, the state and config dirs, and pseudo file systems", () => {
  const context = { home, stateDir: state, configDir: config, base };
  const refused: [string, RegExp][] = [
    [`${base}/nope:/data`, /host path ".*nope" does not exist/],
    [`${data}/file.csv:/data`, /is a file: mount the folder that holds it, or use codemode run --file/],
    ["/:/data", /the host's root "\/" cannot be mounted/],
    [`${home}:/data`, /is \$HOME itself/],
    [`${base}:/data`, /holds \$HOME/],
    [`${state}:/data`, /codemode's state directory/],
    [`${home}/.local:/data`, /codemode's state directory/],
    [`${state}/artifacts:/data`, /codemode's state directory/],
    [`${config}:/data`, /codemode's config directory/],
    ["/proc/self:/data", /kernel pseudo file system/],
    ["/dev:/data", /kernel pseudo file system/],
  ];
  for (const [entry, why] of refused) {
    const result = resolveMounts([parseMount(entry) as never], context);
    assert.match(result as string, why, entry);
  }
  // Through a symlink too: what counts is where the path really leads.
  symlinkSync(home, join(base, "home-link"));
  assert.match(
    resolveMounts([parseMount(`${base}/home-link:/data`) as never], context) as string,
    /\$HOME itself/,
  );
  // Relative and ~ paths resolve against the base and $HOME.
  assert.deepEqual(
    resolveMounts([parseMount("home/data:/data") as never, parseMount("~/data:/mnt/d:rw") as never], context),
    [
      { host: data, target: "/data", readOnly: true },
      { host: data, target: "/mnt/d", readOnly: false },
    ],
  );
});

Deno.test("a bad mount is an error naming CODEMODE_MOUNTS, or the config file and its key", () => {
  assert.throws(
    () => loadSettings({ ...env, CODEMODE_MOUNTS: `${home}:/data` }),
    new RegExp(
      `^SettingsError: Invalid CODEMODE_MOUNTS="${home}:/data": mount ".*": host path .* is \\$HOME itself`,
    ),
  );
  assert.throws(
    () => loadSettings({ ...env, CODEMODE_MOUNTS: `${data}:/usr` }),
    /Invalid CODEMODE_MOUNTS=.*would shadow/,
  );
  assert.throws(
    () => loadSettings({ ...env, CODEMODE_MOUNTS: `${data}:/data,${data}:/data/x` }),
    /sandbox paths "\/data" and "\/data\/x" overlap/,
  );
  const file = parseConfigFile(join(base, "codemode.yaml"), `mounts:\n  - ${data}:/data\n  - /nope:/mnt\n`);
  const { problems } = resolveSettings(env, file);
  assert.equal(problems.length, 1);
  assert.match(
    problems[0].message,
    new RegExp(`^Invalid mounts="${data}:/data,/nope:/mnt" in ".*codemode\\.yaml": .*"/nope" does not exist`),
  );
  // Relative paths in a config file start from the file's folder.
  const relative = parseConfigFile(join(home, "codemode.yaml"), "mounts: [data:/data]");
  assert.deepEqual(resolveSettings(env, relative).settings.mounts, [{
    host: data,
    target: "/data",
    readOnly: true,
  }]);
  assert.deepEqual(loadSettings({ ...env, CODEMODE_MOUNTS: `${data}:/data:rw` }).mounts, [
    { host: data, target: "/data", readOnly: false },
  ]);
});

const mount = { host: "/srv/my data", target: "/data/in", readOnly: true };

Deno.test("every engine mounts with nodev, nosuid and noexec; docker through its local volume driver", () => {
  assert.deepEqual(mountArgs("podman", mount), ["-v", "/srv/my data:/data/in:ro,nodev,nosuid,noexec"]);
  assert.deepEqual(mountArgs("podman", { ...mount, readOnly: false }), [
    "-v",
    "/srv/my data:/data/in:rw,nodev,nosuid,noexec",
  ]);
  assert.deepEqual(mountArgs("docker", mount), [
    "--mount",
    "type=volume,dst=/data/in,volume-driver=local,volume-opt=type=none,volume-opt=device=/srv/my data," +
    '"volume-opt=o=bind,ro,nodev,nosuid,noexec"',
  ]);
  assert.deepEqual(
    mountArgs("docker", { ...mount, host: '/srv/a"b' })[1].split(",").find((f) => f.includes("device")),
    '"volume-opt=device=/srv/a""b"',
  );
  assert.match(
    mountProblem("docker", { ...mount, readOnly: false })!,
    /docker applies nodev,nosuid,noexec to read-only mounts only/,
  );
  assert.throws(() => mountArgs("docker", { ...mount, readOnly: false }), /read-write/);
  assert.match(mountProblem("nerdctl", mount)!, /cannot mount host folders/);
  const config: OciRunConfig = {
    engine: "podman",
    init: true,
    nofile: 1024,
    nproc: 512,
    tmpfsSize: "256m",
    extraArgs: [],
    channel: false,
  };
  const start = {
    name: "n",
    image: "i",
    command: ["python3"],
    limits: { memory: "1m", pids: 1 },
    labels: {},
  };
  const args = buildRunArgs({ ...start, mounts: [mount] }, config);
  assert.ok(
    args.join(" ").includes(
      "--tmpfs /workspace:rw,noexec,nosuid,nodev,size=256m,mode=1777 -v /srv/my data:/data/in:ro",
    ),
  );
  assert.ok(!buildRunArgs(start, config).includes("-v"));
});

Deno.test("copyMounts() copies regular files within the cap, skips links and special files, seals read-only folders", async () => {
  const host = join(base, "copy");
  mkdirSync(join(host, "sub", "empty"), { recursive: true });
  writeFileSync(join(host, "a.txt"), "a");
  writeFileSync(join(host, "sub", "b.txt"), "bb");
  writeFileSync(join(host, "sub", "big.bin"), "x".repeat(100));
  writeFileSync(join(host, ".hidden"), "h");
  symlinkSync("/etc/passwd", join(host, "passwd"));
  execFileSync("mkfifo", [join(host, "pipe")]);
  const copy = await copyMounts([{ host, target: "/data/in", readOnly: true }], 10);
  assert.deepEqual(copy.files.map((f) => [f.path, f.directory ?? false, f.readOnly]), [
    ["/data/in/.hidden", false, true],
    ["/data/in/a.txt", false, true],
    ["/data/in/sub/b.txt", false, true],
    ["/data/in/sub/empty", true, true],
    ["/data/in/sub", true, true],
    ["/data/in", true, true],
  ]);
  assert.equal(copy.bytes, 4);
  assert.match(copy.notes.join("\n"), /1 mounted file\(s\) were not copied .* \(CODEMODE_MAX_MOUNT_COPY\)/);
  assert.match(
    copy.notes.join("\n"),
    /\/data\/in\/passwd \(a symlink\), \/data\/in\/pipe \(not a regular file\)/,
  );
  const rw = await copyMounts([{ host: join(host, "sub"), target: "/mnt/s", readOnly: false }], 1000);
  assert.match(rw.notes.join("\n"), /changes to an rw mount stay in the sandbox/);
});

Deno.test("doctor says how the runtime in use brings each mount in, or why it cannot", () => {
  const plugin = (name: string, mountMode?: "bind" | "copy", problem?: string) =>
    ({ name, mountMode, mountProblem: () => problem }) as unknown as RuntimePlugin;
  const rw = { host: "/h", target: "/data", readOnly: false };
  assert.deepEqual(checkMounts([rw], plugin("podman", "bind")).map((c) => [c.status, c.how]), [
    ["ok", "podman bind mount, nodev,nosuid,noexec"],
  ]);
  assert.equal(
    checkMounts([rw], plugin("docker", "bind", "no rw on docker"))[0].problem?.message,
    "no rw on docker",
  );
  assert.match(
    checkMounts([rw], plugin("pyodide", "copy"))[0].how,
    /copied in at start .*changes stay inside/,
  );
  assert.equal(checkMounts([rw], plugin("nerdctl"))[0].status, "fail");
});
