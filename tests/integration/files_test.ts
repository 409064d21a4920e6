/**
 * Files in and out, end to end through a real `codemode serve` and the SDK client, on podman, docker and
 * Pyodide: artifacts come back as resource_link items and byte for byte through resources/read, are
 * listed, re-sent only when changed, kept apart per serve and deleted when it ends (and reaped after a
 * crash); mounted folders are read, a read-only mount refuses writes and nothing in a mount runs;
 * `codemode run --file` and `--artifacts` work for CI.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import { docker } from "../../plugins/runtime/docker.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { pyodide } from "../../plugins/runtime/pyodide.ts";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { processFolderName } from "../../core/artifacts/stores.ts";
import { fakeHome, ROOT, serve, type Served } from "./_serve.ts";
import { assertNoLeftovers, sessions, TEST_IMAGE } from "./_harness.ts";
import { ArtifactStores } from "../../core/artifacts/stores.ts";
import { bootstrapFrame } from "../../sandbox/source.ts";

/** A resource_link item of a run_python result. */
interface Link {
  type: string;
  uri: string;
  name: string;
  mimeType: string;
  size: number;
}

/** Calls run_python and returns the whole result: text, resource links, structured content. */
async function call(client: Client, code: string, timeout = 60) {
  const r = await client.callTool({ name: "run_python", arguments: { code, timeout } }, { timeout: 180_000 });
  const content = r.content as ({ type: string; text?: string } & Partial<Link>)[];
  return {
    text: content.filter((c) => c.type === "text").map((c) => c.text).join(""),
    links: content.filter((c) => c.type === "resource_link") as Link[],
    structured: (r.structuredContent ?? {}) as Record<string, unknown>,
    isError: Boolean(r.isError),
  };
}

/** The bytes of a resource as resources/read returns it (text or base64 blob). */
async function readBytes(
  client: Client,
  uri: string,
): Promise<{ bytes: Uint8Array; text?: string; mimeType?: string }> {
  const { contents } = await client.readResource({ uri });
  assert.equal(contents.length, 1);
  const item = contents[0] as { uri: string; mimeType?: string; text?: string; blob?: string };
  assert.equal(item.uri, uri);
  if (item.text !== undefined) {
    return { bytes: new TextEncoder().encode(item.text), text: item.text, mimeType: item.mimeType };
  }
  return { bytes: Uint8Array.from(atob(item.blob!), (c) => c.charCodeAt(0)), mimeType: item.mimeType };
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A host folder to mount: a text file, an executable and (as root) a device node. */
function mountFixture(): { ro: string; rw: string } {
  const base = mkdtempSync(join(tmpdir(), "codemode-mount-"));
  chmodSync(base, 0o755);
  const ro = join(base, "ro");
  const rw = join(base, "rw");
  mkdirSync(ro, { mode: 0o755 });
  mkdirSync(rw, { mode: 0o777 });
  chmodSync(rw, 0o777); // the sandbox runs as uid 65534: an rw mount must be writable by it
  writeFileSync(join(ro, "sales.csv"), "month,total\njan,10\nfeb,32\n");
  copyFileSync("/bin/true", join(ro, "tool"));
  chmodSync(join(ro, "tool"), 0o755);
  return { ro, rw };
}

const ARTIFACT_CODE = `
import hashlib, os
from mcp import runtime
os.makedirs("/workspace/artifacts/data", exist_ok=True)
binary = bytes(range(256)) * 4 + os.urandom(6 * 1024 * 1024)
with open("/workspace/artifacts/data/blob.bin", "wb") as f:
    f.write(binary)
runtime.save_artifact("notes.txt", "naïve café ✓\\nline 2\\n")
hashlib.sha256(binary).hexdigest()`;

const engines: [string, RuntimePlugin, boolean][] = [
  ["podman", podman(), true],
  ["docker", docker(), true],
  ["pyodide", pyodide(), false],
];

for (const [engine, runtime, container] of engines) {
  const detection = await runtime.detect();
  const usable = detection.available &&
    (!container || await (runtime as ReturnType<typeof podman>).imageExists(TEST_IMAGE));
  if (!usable) console.warn(`IGNORED files suite on ${engine}: not usable here`);
  const mounts = mountFixture();
  // docker cannot apply noexec to a writable bind, so it gets read-only mounts only (see docs/files.md).
  const rwMount = engine === "docker" ? "" : `,${mounts.rw}:/data/out:rw`;
  const home = fakeHome();
  let served: Served | undefined;
  const session = async () =>
    served ??= await serve({
      CODEMODE_RUNTIME: engine,
      CODEMODE_TIMEOUT: "60",
      CODEMODE_MOUNTS: `${mounts.ro}:/data/in${rwMount}`,
    }, home);
  const test = (name: string, fn: (s: Served) => Promise<void>) =>
    Deno.test({
      name: `${engine}: ${name}`,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: async () => fn(await session()),
    });

  test("artifacts come back as resource_link items and byte for byte through resources/read", async (s) => {
    const r = await call(s.client, ARTIFACT_CODE);
    assert.equal(r.isError, false, r.text);
    const blob = r.links.find((l) => l.name === "data/blob.bin");
    const notes = r.links.find((l) => l.name === "notes.txt");
    assert.ok(blob && notes, `both files are linked: ${JSON.stringify(r.links)}`);
    assert.match(blob.uri, /^codemode:\/\/artifacts\/[0-9a-f]{32}\/data\/blob\.bin$/);
    assert.equal(notes.uri, blob.uri.replace("data/blob.bin", "notes.txt"));
    assert.equal(blob.size, 1024 + 6 * 1024 * 1024);
    assert.equal(blob.mimeType, "application/octet-stream");
    assert.equal(notes.mimeType, "text/plain");
    assert.equal(notes.size, new TextEncoder().encode("naïve café ✓\nline 2\n").length);
    const binary = await readBytes(s.client, blob.uri);
    assert.equal(binary.text, undefined, "binary content arrives as a blob");
    assert.equal(binary.bytes.length, blob.size);
    assert.equal(`'${sha256(binary.bytes)}'`, r.structured.value, "the bytes the sandbox wrote");
    const text = await readBytes(s.client, notes.uri);
    assert.equal(text.text, "naïve café ✓\nline 2\n");
    assert.match(r.text, /artifact: notes\.txt \(text\/plain, \d+ bytes\) codemode:\/\/artifacts\//);
    assert.deepEqual(r.structured.artifacts, r.links.map(({ type: _, ...rest }) => rest));

    const { resources } = await s.client.listResources();
    const listed = resources.filter((res) => res.uri.startsWith("codemode://artifacts/"));
    assert.deepEqual(listed.map((res) => res.name).sort(), ["data/blob.bin", "notes.txt"]);
    assert.equal(listed.find((res) => res.name === "notes.txt")?.mimeType, "text/plain");
  });

  test("a changed file is listed again and read back new; an unchanged one is not re-sent", async (s) => {
    const r = await call(s.client, `runtime.save_artifact("notes.txt", "second version\\n")`);
    assert.equal(r.isError, false, r.text);
    assert.deepEqual(r.links.map((l) => l.name), ["notes.txt"]);
    assert.equal((await readBytes(s.client, r.links[0].uri)).text, "second version\n");
    const quiet = await call(s.client, "print('nothing new')");
    assert.deepEqual(quiet.links, []);
  });

  test("a mounted folder is read; writes to a read-only mount fail; nothing in a mount executes", async (s) => {
    const r = await call(
      s.client,
      `
import errno, os, subprocess
def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write_ro():
    with open("/data/in/new.txt", "w") as f:
        f.write("x")
def change_ro():
    with open("/data/in/sales.csv", "a") as f:
        f.write("x")
results = {
    "read": open("/data/in/sales.csv").read(),
    "create_in_ro": attempt(write_ro),
    "append_to_ro": attempt(change_ro),
    "exec": attempt(lambda: subprocess.run(["/data/in/tool"], check=True)),
}
if os.path.isdir("/data/out"):
    with open("/data/out/written.txt", "w") as f:
        f.write("from the sandbox")
    results["rw"] = "written"
results`,
    );
    assert.equal(r.isError, false, r.text);
    const results = JSON.parse(String(r.structured.value).replaceAll("'", '"'));
    assert.equal(results.read, "month,total\njan,10\nfeb,32\n");
    assert.notEqual(results.create_in_ro, "allowed", "creating a file in a read-only mount");
    assert.notEqual(results.append_to_ro, "allowed", "changing a file in a read-only mount");
    assert.notEqual(results.exec, "allowed", "running a program from a mount");
    if (container) assert.equal(results.exec, "EACCES", "noexec refuses the exec");
    if (engine === "podman") {
      assert.equal(results.rw, "written");
      assert.equal(readFileSync(join(mounts.rw, "written.txt"), "utf8"), "from the sandbox");
    }
  });

  if (engine === "docker") {
    Deno.test({
      name:
        "docker: a read-write mount is refused with an error naming the setting, not mounted without noexec",
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      async fn() {
        const out = await cli(["run", "-"], {
          CODEMODE_RUNTIME: "docker",
          CODEMODE_MOUNTS: `${mounts.rw}:/data/out:rw`,
        }, "print(1)");
        assert.equal(out.code, 1, out.stderr);
        assert.match(
          out.stderr,
          /read-write .* with docker: docker applies nodev,nosuid,noexec to read-only/,
        );
        assert.match(out.stderr, /CODEMODE_MOUNTS/);
      },
    });
  }

  if (container) {
    test("codemode run puts --file files in first and writes the run's artifacts to --artifacts DIR", async () => {
      const dir = mkdtempSync(join(tmpdir(), "codemode-run-files-"));
      writeFileSync(join(dir, "input.csv"), "a,b\n1,2\n");
      writeFileSync(join(dir, "bytes.bin"), Uint8Array.from({ length: 300 }, (_, i) => i % 256));
      writeFileSync(
        join(dir, "prog.py"),
        `
import shutil
rows = open("/workspace/input.csv").read().splitlines()
shutil.copy("/workspace/in/b.bin", "/workspace/artifacts/copy.bin")
from mcp import runtime
runtime.save_artifact("out/rows.txt", str(len(rows)))
`,
      );
      const out = await cli([
        "run",
        join(dir, "prog.py"),
        "--file",
        join(dir, "input.csv"),
        "--file",
        `${join(dir, "bytes.bin")}:/workspace/in/b.bin`,
        "--artifacts",
        join(dir, "artifacts"),
      ], { CODEMODE_RUNTIME: engine, CODEMODE_STATE_DIR: join(dir, "state") });
      assert.equal(out.code, 0, out.stderr);
      assert.equal(readFileSync(join(dir, "artifacts", "out", "rows.txt"), "utf8"), "2");
      assert.deepEqual(
        readFileSync(join(dir, "artifacts", "copy.bin")),
        readFileSync(join(dir, "bytes.bin")),
      );
      assert.match(out.stderr, new RegExp(`artifact: copy\\.bin .* file://${dir}/artifacts/copy\\.bin`));
      assert.deepEqual(readdirSync(join(dir, "state", "artifacts")), [], "run's own store is gone");
      const missing = await cli(
        ["run", "-", "--file", join(dir, "nope.csv")],
        { CODEMODE_RUNTIME: engine },
        "1",
      );
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /cannot read --file ".*nope\.csv": no such file/);
    });
  }

  Deno.test({
    name: `${engine}: the serve's artifacts are deleted when it ends`,
    ignore: !usable,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const s = await session();
      const pid = s.transport.pid!;
      const dir = join(home, "state", "artifacts", processFolderName(hostname(), pid));
      assert.ok(existsSync(dir), "the serve kept its artifacts under the state dir");
      const modes = readdirSync(dir).map((id) => (Deno.statSync(join(dir, id)).mode ?? 0) & 0o777);
      assert.deepEqual([...new Set(modes)], [0o700]);
      const file = join(dir, readdirSync(dir)[0], "files", "notes.txt");
      assert.equal((Deno.statSync(file).mode ?? 0) & 0o777, 0o600);
      await s.close();
      served = undefined;
      const deadline = Date.now() + 15_000;
      while (existsSync(dir) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      assert.equal(existsSync(dir), false, "artifacts outlived their serve");
    },
  });
}

const podmanUsable = (await podman().detect()).available && await podman().imageExists(TEST_IMAGE);

Deno.test({
  name: "two stdio serves never read or delete each other's artifacts; a crashed serve's are reaped",
  ignore: !podmanUsable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const home = fakeHome();
    // Left by a serve that crashed: a pid that no longer runs, on this host.
    const dead = join(home, "state", "artifacts", processFolderName(hostname(), 999_999_999), "f".repeat(32));
    mkdirSync(join(dead, "files"), { recursive: true });
    writeFileSync(join(dead, "files", "old.txt"), "left behind");
    const env = { CODEMODE_RUNTIME: "podman", CODEMODE_TIMEOUT: "60" };
    const a = await serve(env, home);
    const b = await serve(env, home);
    try {
      const code = (who: string) => `from mcp import runtime\nruntime.save_artifact("same.txt", "${who}")`;
      const [ra, rb] = [await call(a.client, code("from a")), await call(b.client, code("from b"))];
      assert.equal(ra.links.length, 1, ra.text);
      assert.equal(rb.links.length, 1, rb.text);
      assert.notEqual(ra.links[0].uri, rb.links[0].uri, "each serve is its own session");
      assert.equal((await readBytes(a.client, ra.links[0].uri)).text, "from a");
      await assert.rejects(a.client.readResource({ uri: rb.links[0].uri }), /not found/i);
      await assert.rejects(b.client.readResource({ uri: ra.links[0].uri }), /not found/i);
      const listed = (await b.client.listResources()).resources.map((r) => r.uri);
      assert.ok(!listed.includes(ra.links[0].uri), "b lists none of a's artifacts");
      assert.equal(existsSync(dead), false, "a crashed serve's artifacts are removed at the next start");
      await b.close();
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal((await readBytes(a.client, ra.links[0].uri)).text, "from a", "b's end left a's alone");
    } finally {
      await Promise.allSettled([a.close(), b.close()]);
    }
  },
});

const rootlessUser = process.env.CODEMODE_ROOTLESS_USER ?? "codemode-rootless";
const rootless = podman({ command: ["runuser", "-u", rootlessUser, "--", "podman"] });
const rootlessDetection = await rootless.detect();
const rootlessUsable = rootlessDetection.available && Boolean(rootlessDetection.rootless) &&
  await rootless.imageExists(TEST_IMAGE);
if (!rootlessUsable) console.warn(`IGNORED rootless podman files test: not usable for ${rootlessUser}`);

Deno.test({
  name:
    "rootless podman: mounts get nodev, nosuid and noexec, read-only holds, rw writes; artifacts come back",
  ignore: !rootlessUsable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { ro, rw } = mountFixture();
    const stores = new ArtifactStores(mkdtempSync(join(tmpdir(), "codemode-rootless-state-")), {
      maxFile: 1e8,
      maxTotal: 1e8,
    });
    const store = stores.open();
    const manager = sessions(rootless, {
      mounts: [{ host: ro, target: "/data/in", readOnly: true }, {
        host: rw,
        target: "/data/out",
        readOnly: false,
      }],
      bootstrap: () =>
        bootstrapFrame({
          max_output: 1024 * 1024,
          servers: [],
          artifacts: { dir: "/workspace/artifacts", max_file: 1e8, max_files: 100 },
        }),
    });
    try {
      const r = await manager.run(
        "rootless",
        `
import errno, json, subprocess
def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
flags = {l.split()[4]: l.split()[5] for l in open("/proc/self/mountinfo") if " /data/" in l}
open("/data/out/from-rootless.txt", "w").write("rw works")
open("/workspace/artifacts/result.txt", "w").write(open("/data/in/sales.csv").read())
print(json.dumps([flags, attempt(lambda: open("/data/in/x", "w")), attempt(lambda: subprocess.run(["/data/in/tool"]))]))`,
        {
          timeout: 60,
          artifacts: store,
        },
      );
      assert.equal(r.status, "ok", r.error);
      const [flags, write, exec] = JSON.parse(r.stdout);
      for (const target of ["/data/in", "/data/out"]) {
        for (const opt of ["nodev", "nosuid", "noexec"]) {
          assert.ok(flags[target].includes(opt), `${target}: ${flags[target]}`);
        }
      }
      assert.ok(flags["/data/in"].startsWith("ro"));
      assert.notEqual(write, "allowed");
      assert.equal(exec, "EACCES");
      assert.equal(readFileSync(join(rw, "from-rootless.txt"), "utf8"), "rw works");
      assert.deepEqual(r.artifacts?.map((a) => a.name), ["result.txt"]);
      assert.equal(new TextDecoder().decode(await store.read("result.txt")), "month,total\njan,10\nfeb,32\n");
    } finally {
      await manager.closeAll();
      await stores.closeAll();
      await assertNoLeftovers(rootless);
    }
  },
});

/** Runs the codemode CLI from source with a test environment. */
function cli(
  args: string[],
  env: Record<string, string>,
  stdin = "",
): Promise<{ code: number; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), "codemode-cli-home-"));
  return new Promise((resolve) => {
    const child = execFile(
      join(ROOT, "node_modules/.bin/deno"),
      ["run", "-A", "--quiet", join(ROOT, "cli.ts"), ...args],
      {
        cwd: home,
        env: {
          PATH: process.env.PATH ?? "",
          HOME: home,
          CODEMODE_STATE_DIR: join(home, "state"),
          CODEMODE_LOG_LEVEL: "error",
          NO_COLOR: "1",
          ...env,
        },
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin!.end(stdin);
  });
}
