/**
 * File attempts of the adversarial suite: artifacts and mounts attacked with symlinks out, `..`, a 60 MiB
 * file, FIFOs, device nodes, hidden files, other sessions' URIs (over MCP and HTTP) and forged artifact
 * frames. After each, the checks look on the host: nothing was written outside the session's own store,
 * nothing outside a mount was read, and no other session's files were served.
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import { type Attempt, type Ctx, facts } from "./_adversarial.ts";
import { serve } from "./_serve.ts";
import { connectHttp, startHttpServe } from "./_serve_http.ts";
import { processFolderName } from "../../core/artifacts/stores.ts";

/** The host side of the mount attempts: a mounted folder full of traps, and a secret beside it. */
export const MOUNT = (() => {
  const base = mkdtempSync(join(tmpdir(), "codemode-adv-mount-"));
  chmodSync(base, 0o755);
  const dir = join(base, "mounted");
  mkdirSync(dir, { mode: 0o755 });
  const outside = join(base, "outside-secret.txt");
  const secret = `mount-neighbour-${crypto.randomUUID()}`;
  writeFileSync(outside, secret);
  writeFileSync(join(dir, "data.txt"), "mounted data\n");
  writeFileSync(join(dir, ".hidden"), "hidden but mounted\n");
  copyFileSync("/bin/true", join(dir, "tool"));
  chmodSync(join(dir, "tool"), 0o755);
  // A shared library, to try mapping it executable from the mount.
  const libm = ["/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"].find(existsSync);
  if (libm) copyFileSync(libm, join(dir, "libm.so.6"));
  symlinkSync(outside, join(dir, "escape"));
  symlinkSync("..", join(dir, "up"));
  symlinkSync("/", join(dir, "root"));
  execFileSync("mkfifo", ["-m", "666", join(dir, "pipe")]);
  // Device nodes the engines' device cgroups allow: only nodev stands between them and the sandbox.
  let devices = false;
  try {
    execFileSync("mknod", ["-m", "666", join(dir, "null-device"), "c", "1", "3"]);
    execFileSync("mknod", ["-m", "666", join(dir, "zero-device"), "c", "1", "5"]);
    devices = true;
  } catch { /* not root: the device attempt checks mknod in the sandbox only */ }
  return { dir, outside, secret, devices };
})();

/** CODEMODE_MOUNTS for the adversarial serve. */
export function mountSetting(): string {
  return `${MOUNT.dir}:/data/in`;
}

/** Every file under `dir`, relative, or [] when it does not exist. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel))) {
      const path = rel ? `${rel}/${name}` : name;
      if (statSync(join(dir, path)).isDirectory()) walk(path);
      else out.push(path);
    }
  };
  walk("");
  return out.sort();
}

/** Files the serve of `ctx` keeps as artifacts (every session's), relative to each store's files/. */
function storedArtifacts(ctx: Ctx): string[] {
  const folder = join(
    ctx.served.home,
    "state",
    "artifacts",
    processFolderName(hostname(), ctx.served.transport.pid!),
  );
  return filesUnder(folder).filter((p) => /^[0-9a-f]{32}\/files\//.test(p)).map((p) =>
    p.split("/").slice(2).join("/")
  );
}

/** Files anywhere under the serve's state dir and the temp dir whose name says the attempt escaped. */
function escapedFiles(ctx: Ctx): string[] {
  const found: string[] = [];
  for (const root of [join(ctx.served.home, "state"), tmpdir(), "/etc", "/tmp"]) {
    try {
      for (const name of readdirSync(root)) {
        if (name.includes("codemode-escaped")) found.push(join(root, name));
      }
    } catch { /* not readable */ }
  }
  return [
    ...found,
    ...filesUnder(join(ctx.served.home, "state")).filter((p) => p.includes("codemode-escaped")),
  ];
}

/** The artifact names a result lists. */
function linked(answer: { structured: Record<string, unknown> }): string[] {
  return ((answer.structured.artifacts ?? []) as { name: string }[]).map((a) => a.name).sort();
}

/** The notes of a result, joined. */
function notes(answer: { structured: Record<string, unknown> }): string {
  return ((answer.structured.notes ?? []) as string[]).join("\n");
}

/** Artifacts: whatever is left in /workspace/artifacts, only regular files in it come out, within caps. */
export const artifacts: Attempt[] = [
  {
    area: "artifacts",
    name: "symlinks out of the artifacts folder are not followed (files, folders, devices, the mount)",
    code: `
A = "/workspace/artifacts/sym"
os.makedirs(A, exist_ok=True)
for name, target in [("passwd", "/etc/passwd"), ("environ", "/proc/self/environ"), ("etc", "/etc"),
                     ("zero", "/dev/zero"), ("mounted", "/data/in/data.txt"), ("up", "../..")]:
    os.symlink(target, f"{A}/{name}")
open(f"{A}/ok.txt", "w").write("fine")
print("made")`,
    check(answer, ctx) {
      assert.equal(answer.structured.status, "ok", answer.text.slice(0, 500));
      assert.deepEqual(linked(answer), ["sym/ok.txt"]);
      for (const name of ["passwd", "environ", "etc", "zero", "mounted", "up"]) {
        assert.match(notes(answer), new RegExp(`"sym/${name}" was left out: it is a symbolic link`));
      }
      assert.deepEqual(storedArtifacts(ctx).filter((p) => p.startsWith("sym/")), ["sym/ok.txt"]);
    },
  },
  {
    area: "artifacts",
    name: "'..', absolute and hidden names are refused by save_artifact and never reach the host",
    code: `
from mcp import runtime
results = {}
for name in ["../codemode-escaped", "/etc/codemode-escaped", "a/../../codemode-escaped", ".env",
             "dir/.secret", "a//b", "x\\\\y", "c:codemode-escaped", "", "ok\\x00codemode-escaped"]:
    try:
        runtime.save_artifact(name, "payload")
        results[name] = "saved"
    except (ValueError, TypeError) as e:
        results[name] = type(e).__name__
report(results=results)`,
    check(answer, ctx) {
      const results = facts(answer).results as Record<string, string>;
      assert.deepEqual(Object.values(results).filter((v) => v === "saved"), [], JSON.stringify(results));
      assert.deepEqual(linked(answer), []);
      assert.deepEqual(escapedFiles(ctx), []);
    },
  },
  {
    area: "artifacts",
    name: "hidden files and folders in the artifacts folder are not collected",
    code: `
A = "/workspace/artifacts/hid"
os.makedirs(f"{A}/.git", exist_ok=True)
os.makedirs(f"{A}/visible", exist_ok=True)
open(f"{A}/.env", "w").write("TOKEN=x")
open(f"{A}/.git/config", "w").write("[core]")
open(f"{A}/visible/.secret", "w").write("s")
open(f"{A}/visible/shown.txt", "w").write("shown")
print("made")`,
    check(answer, ctx) {
      assert.deepEqual(linked(answer), ["hid/visible/shown.txt"]);
      assert.match(notes(answer), /"hid\/\.env" was left out: hidden files/);
      assert.deepEqual(storedArtifacts(ctx).filter((p) => p.startsWith("hid/")), ["hid/visible/shown.txt"]);
    },
  },
  {
    area: "artifacts",
    name: "a FIFO and a socket in the artifacts folder are skipped without hanging the run",
    timeout: 20,
    code: `
A = "/workspace/artifacts/special"
os.makedirs(A, exist_ok=True)
os.mkfifo(f"{A}/pipe")
s = socket.socket(socket.AF_UNIX)
s.bind(f"{A}/sock")
open(f"{A}/ok.txt", "w").write("fine")
print("made")`,
    check(answer) {
      assert.equal(answer.structured.status, "ok", answer.text.slice(0, 500));
      assert.ok(answer.ms < 15_000, `the run took ${answer.ms} ms`);
      assert.deepEqual(linked(answer), ["special/ok.txt"]);
      assert.match(notes(answer), /"special\/pipe" was left out: it is not a regular file/);
      assert.match(notes(answer), /"special\/sock" was left out: it is not a regular file/);
    },
  },
  {
    area: "artifacts",
    name: "device nodes cannot be made in the artifacts folder, nor linked in",
    code: `
A = "/workspace/artifacts/dev"
os.makedirs(A, exist_ok=True)
import stat as st
results = {
    "mknod_char": attempt(lambda: os.mknod(f"{A}/mem", 0o666 | st.S_IFCHR, os.makedev(1, 1))),
    "mknod_block": attempt(lambda: os.mknod(f"{A}/disk", 0o666 | st.S_IFBLK, os.makedev(8, 0))),
    "hardlink_null": attempt(lambda: os.link("/dev/null", f"{A}/null")),
}
open(f"{A}/ok.txt", "w").write("fine")
report(results=results)`,
    check(answer, ctx) {
      const results = facts(answer).results as Record<string, string>;
      assert.deepEqual(Object.entries(results).filter(([, v]) => v === "allowed"), []);
      assert.deepEqual(linked(answer), ["dev/ok.txt"]);
      assert.deepEqual(storedArtifacts(ctx).filter((p) => p.startsWith("dev/")), ["dev/ok.txt"]);
    },
  },
  {
    area: "artifacts",
    name: "a 60 MiB artifact is left out and named; the others arrive and the run succeeds",
    timeout: 60,
    code: `
A = "/workspace/artifacts/size"
os.makedirs(A, exist_ok=True)
chunk = os.urandom(1024 * 1024)
with open(f"{A}/huge.bin", "wb") as f:
    for _ in range(60):
        f.write(chunk)
open(f"{A}/small.txt", "w").write("small")
'done'`,
    check(answer, ctx) {
      assert.equal(answer.structured.status, "ok", answer.text.slice(0, 500));
      assert.equal(answer.structured.value, "'done'");
      assert.deepEqual(linked(answer), ["size/small.txt"]);
      assert.match(notes(answer), /"size\/huge\.bin" was left out: it is 60\.0 MiB, over the 50\.0 MiB cap/);
      assert.match(notes(answer), /CODEMODE_MAX_ARTIFACT/);
      assert.ok(!storedArtifacts(ctx).includes("size/huge.bin"));
    },
  },
  {
    area: "artifacts",
    name: "forged artifact frames are refused and write nothing outside the session's store",
    timeout: 30,
    code: `
import base64, gc
from codemode_runtime.process import Process
proc = next(o for o in gc.get_objects() if isinstance(o, Process))
run, send = proc.current, proc.channel.send
b64 = lambda data: base64.b64encode(data).decode()
def piece(path, data=b"FORGED", offset=0, end=True, run_id=None, **extra):
    send({"type": "artifact", "id": run_id or run, "path": path, "offset": offset, "data": b64(data),
          **({"end": True} if end else {}), **extra})
for path in ["../../codemode-escaped", "/tmp/codemode-escaped", "a/../../codemode-escaped",
             ".codemode-escaped", "x/./codemode-escaped", "x\\\\codemode-escaped", "c:codemode-escaped",
             "x\\x00codemode-escaped", "", "a//codemode-escaped", "%2e%2e/" * 3 + "percent-literal"]:
    piece(path)
piece("forge/other-run.txt", run_id="run-999-forged")
piece("forge/gap.txt", end=False)
piece("forge/gap.txt", offset=100)
send({"type": "artifact", "id": run, "path": "forge/bad64.txt", "offset": 0, "data": "!!!not base64!!!", "end": True})
piece("forge/liar.txt", size=5)
piece("forge/claims-huge.bin", end=False, size=10 * 1024 ** 3)
piece("forge/file", b"a file")
piece("forge/file/child", b"under a file")
for i in range(8):
    piece(f"forge/open-{i}.txt", end=False)
send({"type": "artifact_skipped", "id": run, "path": "../../codemode-escaped", "reason": "hidden"})
send({"type": "artifact_skipped", "id": run, "path": "forge/x", "reason": "rm -rf /"})
for i in range(200):
    piece(f"../flood-{i}")
piece("forge/genuine.txt", b"kept")
'sent'`,
    check(answer, ctx) {
      assert.equal(answer.structured.status, "ok", answer.text.slice(0, 800));
      assert.equal(answer.structured.value, "'sent'");
      const kept = storedArtifacts(ctx).filter((p) => p.startsWith("forge/") || p.includes("escaped"));
      // Literal "%2e%2e" folders are fine names; nothing else forged may be kept, and nothing may escape.
      assert.deepEqual(
        kept.filter((p) => !p.startsWith("%2e%2e/")),
        ["forge/file", "forge/genuine.txt"],
        kept.join(", "),
      );
      assert.deepEqual(escapedFiles(ctx), []);
      const text = notes(answer);
      assert.match(text, /"\.\.\/\.\.\/codemode-escaped" was refused: the path has a "\.\." component/);
      assert.match(text, /"forge\/gap\.txt" was dropped: its pieces came out of order/);
      assert.match(text, /"forge\/bad64\.txt" was dropped: a piece was not valid base64/);
      assert.match(text, /"forge\/liar\.txt" was dropped: its size does not match/);
      assert.match(text, /"forge\/claims-huge\.bin" was left out: it is 10240\.0 MiB, over/);
      assert.match(text, /"forge\/file\/child" was left out: the artifact "forge\/file" is a file/);
      assert.match(text, /"forge\/open-0\.txt" was dropped: another file began before it had fully arrived/);
      assert.match(text, /more artifact\(s\) were left out/);
    },
  },
  {
    area: "artifacts",
    name: "another session's artifact URIs read as not found over MCP, guessed or exact",
    async steps(ctx) {
      const made = await ctx.run(
        `from mcp import runtime\nruntime.save_artifact("mine/secret.txt", SECRETS[0])`,
      );
      const uri = ((made.structured.artifacts ?? []) as { uri: string }[])[0]?.uri;
      assert.ok(uri, made.text);
      const other = await serve({ CODEMODE_RUNTIME: ctx.engine }, ctx.served.home);
      try {
        const id = uri.split("/")[3];
        for (
          const attempt of [
            uri,
            `codemode://artifacts/${id}/mine/../mine/secret.txt`,
            `codemode://artifacts/${id}/mine%2Fsecret.txt`,
            `codemode://artifacts/${id.toUpperCase()}/mine/secret.txt`,
            `codemode://artifacts/../${id}/mine/secret.txt`,
          ]
        ) {
          await assert.rejects(readAny(other.client, attempt), /not found|invalid/i, attempt);
        }
        const listed = (await other.client.listResources()).resources.map((r) => r.uri);
        assert.ok(!listed.some((u) => u.includes(id)), "the other session lists none of these artifacts");
      } finally {
        await other.close();
      }
      // Its owner still reads it, and the other serve's end deleted nothing of it.
      const own = await ctx.served.client.readResource({ uri });
      assert.equal((own.contents[0] as { text: string }).text, ctx.fix.secrets[0]);
    },
  },
  {
    area: "artifacts",
    name: "another HTTP session's artifacts cannot be downloaded or read, with any path trick",
    async steps(ctx) {
      const token = `adv-${crypto.randomUUID()}`;
      const http = await startHttpServe(ctx.served.home, {
        CODEMODE_RUNTIME: ctx.engine,
        CODEMODE_HTTP_TOKEN: token,
      });
      const auth = { authorization: `Bearer ${token}` };
      const [a, b] = [await connectHttp(http.url, auth), await connectHttp(http.url, auth)];
      try {
        const r = await a.client.callTool(
          {
            name: "run_python",
            arguments: { code: 'from mcp import runtime\nruntime.save_artifact("a.txt", "A-ONLY")' },
          },
          { timeout: 180_000 },
        );
        const uri = (r.structuredContent as { artifacts: { uri: string }[] }).artifacts[0].uri;
        const tail = uri.slice("codemode://artifacts/".length);
        const id = tail.split("/")[0];
        const asB = { ...auth, "mcp-session-id": b.sessionId() };
        for (
          const path of [
            `/artifacts/${tail}`,
            `/artifacts/${id}/../${id}/a.txt`,
            `/artifacts/${id}/%2e%2e/a.txt`,
          ]
        ) {
          const got = await download(http.url, path, asB);
          assert.equal(got.status, 404, `${path}: ${got.body}`);
          assert.ok(!got.body.includes("A-ONLY"));
        }
        const none = await download(http.url, `/artifacts/${tail}`, auth);
        assert.equal(none.status, 400);
        await assert.rejects(b.client.readResource({ uri }), /not found/i);
        assert.equal(
          (await download(http.url, `/artifacts/${tail}`, { ...auth, "mcp-session-id": a.sessionId() })).body,
          "A-ONLY",
        );
      } finally {
        await Promise.allSettled([a.end(), b.end()]);
        await http.stop();
      }
    },
  },
];

/** Mounts: the mounted folder is readable and nothing else; nothing in it runs or opens as a device. */
export const mounts: Attempt[] = [
  {
    area: "mounts",
    name: "symlinks and '..' inside a mount lead nowhere on the host",
    code: `
found = {}
for path in ["/data/in/escape", "/data/in/up/outside-secret.txt", "/data/in/../outside-secret.txt",
             "/data/in/root" + FIX["markerFile"], "/data/in/up/up/up" + FIX["markerFile"]]:
    try:
        found[path] = open(path).read()[:200]
    except OSError as e:
        found[path] = errno.errorcode.get(e.errno, str(e.errno))
walked = sorted(os.listdir("/data"))
report(found=found, walked=walked, realpath=os.path.realpath("/data/in/escape"))`,
    check(answer) {
      const f = facts(answer);
      assert.ok(!answer.text.includes(MOUNT.secret), "a file beside the mount was read");
      assert.ok(!JSON.stringify(f).includes("host-marker-"), "the host marker was read");
      assert.deepEqual(f.walked, ["in"]);
    },
  },
  {
    area: "mounts",
    name: "every mount is read-only, nodev, nosuid and noexec, and the mount refuses writes",
    code: `
lines = [l.split() for l in open("/proc/self/mountinfo") if " /data" in l]
flags = {l[4]: l[5] for l in lines}
results = {
    "create": attempt(lambda: open("/data/in/new.txt", "w").write("x")),
    "append": attempt(lambda: open("/data/in/data.txt", "a").write("x")),
    "chmod": attempt(lambda: os.chmod("/data/in/data.txt", 0o777)),
    "rename": attempt(lambda: os.rename("/data/in/data.txt", "/data/in/moved.txt")),
    "unlink": attempt(lambda: os.unlink("/data/in/data.txt")),
    "remount": syscall("mount", None, b"/data/in", None, 0x20 | 0x1000, None),
}
report(flags=flags, results=results)`,
    check(answer) {
      const f = facts(answer);
      const flags = f.flags as Record<string, string>;
      assert.deepEqual(Object.keys(flags), ["/data/in"]);
      for (const opt of ["ro", "nosuid", "nodev", "noexec"]) {
        assert.ok(flags["/data/in"].split(",").includes(opt), `/data/in lacks ${opt}: ${flags["/data/in"]}`);
      }
      const results = f.results as Record<string, string>;
      assert.deepEqual(Object.entries(results).filter(([, v]) => v === "allowed" || v === "ok"), []);
    },
  },
  {
    area: "mounts",
    name: "nothing in a mount executes: exec, the dynamic loader, mmap PROT_EXEC, ctypes",
    code: `
import mmap, glob
loader = (glob.glob("/lib64/ld-linux-*.so*") + glob.glob("/lib/ld-linux-*.so*"))[0]
def map_exec():
    with open("/data/in/tool", "rb") as f:
        mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
results = {
    "exec": attempt(lambda: subprocess.run(["/data/in/tool"], check=True)),
    "loader": attempt(lambda: subprocess.run([loader, "/data/in/tool"], check=True, capture_output=True)),
    "mmap_exec": attempt(map_exec),
    "ctypes": attempt(lambda: ctypes.CDLL("/data/in/libm.so.6")),
}
report(results=results)`,
    check(answer) {
      const results = facts(answer).results as Record<string, string>;
      assert.deepEqual(
        Object.entries(results).filter(([, v]) => v === "allowed"),
        [],
        JSON.stringify(results),
      );
    },
  },
  {
    area: "mounts",
    name: "device nodes in a mount cannot be opened (nodev), and the sandbox cannot make one",
    code: `
import stat as st
results = {}
for name in ["null-device", "zero-device"]:
    path = "/data/in/" + name
    if os.path.exists(path):
        results["open " + name] = attempt(lambda: os.close(os.open(path, os.O_RDWR)))
results["mknod"] = attempt(lambda: os.mknod("/workspace/dev-null", 0o666 | st.S_IFCHR, os.makedev(1, 3)))
report(results=results)`,
    check(answer) {
      const results = facts(answer).results as Record<string, string>;
      if (MOUNT.devices) {
        assert.equal(results["open null-device"], "EACCES", "nodev refuses the device node");
        assert.equal(results["open zero-device"], "EACCES");
      }
      assert.deepEqual(Object.entries(results).filter(([, v]) => v === "allowed"), []);
    },
  },
  {
    area: "mounts",
    name: "a FIFO in a mount cannot hang the sandbox when opened without a reader",
    timeout: 20,
    code: `
results = {
    "write_nonblocking": attempt(lambda: os.close(os.open("/data/in/pipe", os.O_WRONLY | os.O_NONBLOCK))),
    "read_nonblocking": attempt(lambda: os.close(os.open("/data/in/pipe", os.O_RDONLY | os.O_NONBLOCK))),
}
report(results=results, hidden=open("/data/in/.hidden").read())`,
    check(answer) {
      const f = facts(answer);
      // No host process reads this FIFO: a write-open finds no reader, or the read-only mount refuses it.
      assert.match((f.results as Record<string, string>).write_nonblocking, /^(ENXIO|EROFS|EACCES)$/);
      assert.equal(f.hidden, "hidden but mounted\n");
    },
  },
];

async function readAny(client: Client, uri: string) {
  return await client.readResource({ uri });
}

function download(
  url: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: target.hostname, port: target.port, path, method: "GET", headers }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d)).on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}
