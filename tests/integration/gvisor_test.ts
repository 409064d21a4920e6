/**
 * CODEMODE_ISOLATION=gvisor end to end: doctor proves gVisor from the host and from inside a sandbox (podman
 * and docker); one stdio serve runs every feature under gVisor (prewarm, displays, artifacts, mounts, skills,
 * upstream tools behind an approval); and with runsc gone from PATH the first run fails with doctor's
 * finding while no container of that serve is ever created, under runc or anything else.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { release, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { podman } from "../../plugins/runtime/podman.ts";
import { findRunsc } from "../../plugins/runtime/gvisor.ts";
import { askingClient, reply } from "./_approvals.ts";
import { fakeHome, ROOT, serve } from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { LABELS } from "../../core/sandbox/session_manager.ts";
import type { DoctorReport } from "../../core/doctor/checks.ts";

const runtime = podman({ isolation: "gvisor" });
const usable = !findRunsc().problem && (await runtime.detect()).available &&
  await runtime.imageExists(TEST_IMAGE);
if (!usable) {
  console.warn(`IGNORED gVisor tests: runsc, podman or image ${TEST_IMAGE} missing (scripts/setup.sh)`);
}

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: !usable, sanitizeOps: false, sanitizeResources: false, fn });

/** `codemode doctor --json --quick` in a fresh home, with `env` on top. */
function doctor(env: Record<string, string>): Promise<{ code: number; report: DoctorReport }> {
  const home = fakeHome();
  return new Promise((resolve, reject) => {
    execFile(
      join(ROOT, "node_modules/.bin/deno"),
      ["run", "-A", "--quiet", join(ROOT, "cli.ts"), "doctor", "--json", "--quick"],
      {
        cwd: home,
        env: { PATH: process.env.PATH ?? "", HOME: home, CODEMODE_STATE_DIR: join(home, "state"), ...env },
        timeout: 240_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout) => {
        try {
          resolve({ code: (error as { code?: number } | null)?.code ?? 0, report: JSON.parse(stdout) });
        } catch {
          reject(error ?? new Error(`doctor printed no JSON: ${stdout.slice(0, 500)}`));
        }
      },
    );
  });
}

test("doctor proves gVisor from the host and from inside the sandbox, on podman and docker", async () => {
  const { code, report } = await doctor({ CODEMODE_ISOLATION: "gvisor" });
  assert.equal(code, 0, JSON.stringify(report.findings));
  assert.equal(report.isolation.setting, "gvisor");
  assert.equal(report.runtime, "podman");
  assert.equal(report.isolation.proof?.proven, true, report.isolation.proof?.facts.join("\n"));
  const byName = Object.fromEntries(report.runtimes.map((r) => [r.name, r]));
  for (const engine of ["podman", "docker"]) {
    const check = byName[engine];
    if (!check.installed) continue; // docker is optional; podman was chosen above
    assert.equal(check.isolation?.expected, "gvisor", engine);
    assert.equal(check.isolation?.proven, true, `${engine}: ${check.isolation?.facts.join("\n")}`);
    assert.ok(check.isolation?.kernel, `${engine}: the sandbox reported no kernel`);
    assert.notEqual(
      check.isolation.kernel.sandbox,
      release(),
      `${engine}: a container has the host's kernel`,
    );
    assert.equal(check.sandbox?.seccomp?.codemode, true, `${engine}: codemode's profile inside gVisor`);
  }
  // Pyodide is not a container: under gVisor it is never started, and never a fallback.
  assert.equal(byName.pyodide.notUsed, true);
});

test("a stdio serve runs every feature under gVisor: prewarm, displays, artifacts, mounts, skills, tools, approvals", async () => {
  const data = mkdtempSync(join(tmpdir(), "codemode-gvisor-data-"));
  writeFileSync(join(data, "input.txt"), "from the host");
  chmodSync(data, 0o755); // the sandbox runs as nobody
  const asking = askingClient("gvisor-tests", reply.approve());
  const served = await serve(
    {
      CODEMODE_ISOLATION: "gvisor",
      CODEMODE_RUNTIME: "podman",
      CODEMODE_MOUNTS: `${data}:/data/in`,
      CODEMODE_CONFIRM_TOOLS: "memory/create_entities",
    },
    fakeHome(),
    asking.client,
  );
  try {
    // Prewarmed as the client connected: running, under gVisor, before any run.
    let running: { isolation: string; runtime: string }[] = [];
    for (let i = 0; i < 120 && running.length === 0; i++) {
      const stats = await served.client.readResource({ uri: "codemode://stats" });
      running = JSON.parse((stats.contents[0] as { text: string }).text).sandboxes.running;
      if (running.length === 0) await new Promise((r) => setTimeout(r, 500));
    }
    assert.deepEqual(running.map((s) => [s.runtime, s.isolation]), [["podman", "gvisor"]]);

    const r = await served.client.callTool(
      {
        name: "run_python",
        arguments: {
          code: `import platform
import matplotlib.pyplot as plt
from mcp import runtime
plt.plot([1, 3, 2]); plt.show()
runtime.save_artifact("report.txt", "made under gVisor")
text = open("/data/in/input.txt").read()
try:
    open("/data/in/input.txt", "a").write("x")
    wrote = "allowed"
except OSError as e:
    wrote = type(e).__name__
await runtime.save_skill("double", "def run(x):\\n    return 2 * x\\n", "Doubles a number")
from skills import double
echo = await mcp_everything.echo(message="through gVisor")
await mcp_memory.create_entities(entities=[{"name": "gvisor", "entityType": "test", "observations": ["ok"]}])
(platform.release(), text, wrote, double.run(21), echo)`,
          timeout: 120,
        },
      },
      { timeout: 180_000 },
    );
    const content = r.content as { type: string; text?: string; mimeType?: string; uri?: string }[];
    assert.equal(r.isError, false, content.map((item) => item.text ?? `[${item.type}]`).join("\n"));
    const value = String((r.structuredContent as { value?: string }).value);
    assert.ok(!value.includes(`'${release()}'`), `the host's kernel answered: ${value}`);
    assert.match(value, /'from the host', 'PermissionError|'from the host', 'OSError/);
    assert.match(value, /, 42, /);
    assert.match(value, /through gVisor/);
    assert.ok(content.some((item) => item.type === "image" && item.mimeType === "image/png"), "no plot");
    assert.ok(content.some((item) => item.type === "resource_link" && /report\.txt$/.test(item.uri ?? "")));
    assert.equal(asking.questions.length, 1, "the approval was asked once");
  } finally {
    await served.close();
  }
});

test("without runsc on PATH the first run fails with doctor's finding, and no container of the serve exists", async () => {
  const path = pathWithout("runsc");
  const events = [watch("podman"), watch("docker")];
  const served = await serve({ CODEMODE_ISOLATION: "gvisor", PATH: path });
  try {
    const first = await served.run("print(1)", 30);
    assert.equal(first.isError, true, first.text);
    assert.match(first.text, /gVisor's runsc is not installed/);
    assert.match(first.text, /apt-get install runsc/);
    assert.match(first.text, /no fallback to runc/);
    // Doctor says the same, and fails.
    const { code, report } = await doctor({ CODEMODE_ISOLATION: "gvisor", PATH: path });
    assert.equal(code, 1);
    assert.ok(
      report.findings.some((f: { message: string; fix?: string }) =>
        /runsc is not installed/.test(f.message) && /apt-get install runsc/.test(f.fix ?? "")
      ),
      JSON.stringify(report.findings),
    );
  } finally {
    await served.close();
  }
  // A container of our own while the watchers run: they must see it, or their silence proves nothing.
  const control = `codemode-gvisor-control-${process.pid}`;
  await new Promise((resolve) =>
    execFile("podman", ["run", "--rm", "--pull", "never", "--name", control, TEST_IMAGE, "true"], resolve)
  );
  const pid = String(served.transport.pid);
  const seen = (await Promise.all(events.map((stop) => stop()))).flat();
  assert.ok(seen.some((event) => event.name === control), "the podman event watcher saw nothing");
  const ours = seen.filter((event) => event.owner === pid);
  assert.deepEqual(ours, [], "the serve created containers");
});

/** A PATH of symlinks to everything on this one but `name`. */
function pathWithout(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), "codemode-path-"));
  const bin = join(dir, "bin");
  mkdirSync(bin);
  const seen = new Set<string>();
  for (const from of (process.env.PATH ?? "").split(delimiter).filter(Boolean)) {
    let entries: string[] = [];
    try {
      entries = readdirSync(from);
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (entry === name || seen.has(entry)) continue;
      seen.add(entry);
      symlinkSync(join(from, entry), join(bin, entry));
    }
  }
  return bin;
}

/** Streams an engine's container events until the returned stop(); each with its owner-pid label. */
function watch(
  engine: "podman" | "docker",
): () => Promise<{ action: string; name: string; owner?: string }[]> {
  const child: ChildProcess = spawn(engine, [
    "events",
    "--format",
    engine === "docker" ? "{{json .}}" : "json",
  ], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  child.on("error", () => {});
  let text = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => text += chunk);
  return async () => {
    // Events are flushed as they happen; a moment lets the last ones arrive.
    await new Promise((r) => setTimeout(r, 1000));
    child.kill();
    return text.split("\n").filter(Boolean).flatMap((line) => {
      try {
        const e = JSON.parse(line);
        if (e.Type !== "container" && e.Type !== undefined) return [];
        const attributes = e.Attributes ?? e.Actor?.Attributes ?? {};
        return [{
          action: e.Status ?? e.Action,
          name: e.Name ?? attributes.name,
          owner: attributes[LABELS.owner],
        }];
      } catch {
        return [];
      }
    });
  };
}
