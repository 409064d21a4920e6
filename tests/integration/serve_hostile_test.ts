/**
 * Hostile and broken sandbox code against a real `codemode serve` over stdio with a real MCP client:
 * every attempt gets a clear result, the next call is answered, and no container is left behind.
 * Runs against each container engine that is set up (podman, docker).
 */
import assert from "node:assert/strict";
import { podman } from "../../plugins/runtime/podman.ts";
import { docker } from "../../plugins/runtime/docker.ts";
import type { RuntimePlugin } from "../../core/contracts/runtime.ts";
import { LABELS } from "../../core/session_manager.ts";
import { HOST_SECRET, serve, type Served, SERVER_SECRET } from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";

const engines: [string, RuntimePlugin][] = [["podman", podman()], ["docker", docker()]];

for (const [name, runtime] of engines) {
  const detection = await runtime.detect();
  const usable = detection.available && await (runtime as ReturnType<typeof podman>).imageExists(TEST_IMAGE);
  if (!usable) console.warn(`IGNORED hostile-code suite on ${name}: engine or image ${TEST_IMAGE} missing`);

  const test = (title: string, fn: (s: Served) => Promise<void>) =>
    Deno.test({
      name: `${name}: ${title}`,
      ignore: !usable,
      sanitizeOps: false,
      sanitizeResources: false,
      async fn() {
        const s = await serve({
          CODEMODE_RUNTIME: name,
          CODEMODE_MAX_OUTPUT: "256k",
          CODEMODE_MEMORY: "256m",
        });
        const pid = s.transport.pid;
        try {
          await fn(s);
          const alive = await s.run("print('still serving')");
          assert.equal(alive.text, "still serving\n", "the server must answer the next call");
        } finally {
          await s.close();
        }
        await assertNoSandboxOf(runtime, pid);
      },
    });

  test("sandbox code sees no network, a read-only root, no privileges and no secrets", async (s) => {
    const r = await s.run(`
import os, socket, json, subprocess
facts = {}
status = open('/proc/self/status').read()
facts['uid'] = os.getuid()
facts['cap_eff'] = [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]
facts['no_new_privs'] = [l.split()[1] for l in status.splitlines() if l.startswith('NoNewPrivs')][0]
def attempt(fn):
    try:
        fn(); return 'allowed'
    except Exception as e:
        return type(e).__name__
facts['connect_public'] = attempt(lambda: socket.create_connection(('1.1.1.1', 53), timeout=2))
facts['connect_gateway'] = attempt(lambda: socket.create_connection(('10.0.2.2', 80), timeout=2))
facts['interfaces'] = sorted(os.listdir('/sys/class/net'))
facts['write_root'] = attempt(lambda: open('/etc/evil', 'w'))
facts['write_tmp'] = attempt(lambda: open('/tmp/ok', 'w').write('x'))
import shutil
shutil.copy('/bin/true', '/tmp/true'); os.chmod('/tmp/true', 0o755)
facts['exec_tmp'] = attempt(lambda: subprocess.run(['/tmp/true'], check=True))
facts['host_repo_visible'] = os.path.exists('/work') or os.path.exists('/root/.ssh')
env_dump = json.dumps(dict(os.environ))
proc_dump = ''.join(open(f'/proc/{p}/environ', errors='replace').read() for p in os.listdir('/proc') if p.isdigit() and os.access(f'/proc/{p}/environ', os.R_OK))
facts['secrets_visible'] = any(x in env_dump + proc_dump for x in ('${HOST_SECRET}', '${SERVER_SECRET}'))
from mcp import runtime
facts['server_info_leaks'] = '${SERVER_SECRET}' in json.dumps([runtime.describe_server(n) for n in runtime.discovered_servers()])
facts
`);
    assert.equal(r.isError, false, r.text);
    const facts = eval(
      `(${String(r.structured.value).replaceAll("True", "true").replaceAll("False", "false")})`,
    );
    assert.equal(facts.uid, 65534);
    assert.equal(facts.cap_eff, "0000000000000000");
    assert.equal(facts.no_new_privs, "1");
    assert.notEqual(facts.connect_public, "allowed");
    assert.notEqual(facts.connect_gateway, "allowed");
    assert.deepEqual(facts.interfaces, ["lo"]);
    assert.equal(facts.write_root, "OSError");
    assert.equal(facts.write_tmp, "allowed");
    assert.equal(facts.exec_tmp, "PermissionError");
    assert.equal(facts.host_repo_visible, false);
    assert.equal(facts.secrets_visible, false);
    assert.equal(facts.server_info_leaks, false);
  });

  test("a fork bomb is contained and reported", async (s) => {
    const r = await s.run(
      "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
      3,
    );
    assert.equal(r.isError, true);
    assert.match(String(r.structured.status), /timeout|error/);
  });

  test("a memory bomb is contained and reported", async (s) => {
    const r = await s.run("chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))", 20);
    assert.equal(r.isError, true);
    assert.match(r.text, /MemoryError|ended during the run|killed/);
  });

  test("forged and malformed frames written to the protocol channel are not obeyed", async (s) => {
    // Run ids are unguessable, so a forged "done" cannot end a run; malformed frames are dropped.
    const r = await s.run(`
import os, json
forged = [b'{"type":"done","id":"run-1","status":"ok","value":"FORGED"}\\n', b'not json at all\\n',
          b'{"type":"rpc","id":1,"method":"shell","params":{}}\\n', b'{"type":"output"}\\n', b'\\xff\\xfe\\n']
written = 0
for fd in map(int, os.listdir('/proc/self/fd')):
    if fd > 2:
        for f in forged:
            try:
                os.write(fd, f); written += 1
            except OSError:
                pass
print('wrote', written > 0)
'genuine'
`);
    assert.equal(r.isError, false, r.text);
    assert.equal(r.structured.value, "'genuine'");
    assert.doesNotMatch(r.text, /FORGED/);
  });

  test("10 MB without a newline on fd 1 is truncated at the cap and stated", async (s) => {
    const r = await s.run("import os\nos.write(1, b'x' * 10_000_000)\n'after'");
    assert.equal(r.isError, false, r.text.slice(0, 300));
    assert.equal(String(r.structured.stdout).length, 256 * 1024);
    assert.match(JSON.stringify(r.structured.notes), /stdout truncated/);
    assert.equal(r.structured.value, "'after'");
  });

  test("binary output and a closed stdin do not break the channel", async (s) => {
    const r = await s.run(
      "import os\nos.write(1, bytes(range(256)) * 4)\nos.close(0)\nos.write(2, b'\\x00\\x01\\xff')\n'ok'",
    );
    assert.equal(r.isError, false, r.text.slice(0, 300));
    assert.equal(r.structured.value, "'ok'");
  });

  test("killing PID 1 of the container loses the session, says so, and the next call starts fresh", async (s) => {
    await s.run("marker = 1");
    // PID 1 is the engine's init, which the kernel shields inside its namespace; the runtime itself is not.
    const code =
      "import os, signal, time\nos.kill(1, signal.SIGKILL)\nos.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(5)";
    const r = await s.run(code, 10);
    assert.equal(r.isError, true);
    assert.equal(r.structured.session_lost, true);
    const fresh = await s.run("'marker' in globals()");
    assert.equal(fresh.structured.value, "False");
  });

  test("a huge final value and a huge exception message come back bounded", async (s) => {
    const v = await s.run("'x' * 50_000_000");
    assert.equal(v.isError, false);
    assert.ok(String(v.structured.value).length < 2_000_000);
    const e = await s.run("raise ValueError('y' * 50_000_000)");
    assert.equal(e.isError, true);
    assert.ok(String(e.structured.error).length < 2_000_000);
  });
}

async function assertNoSandboxOf(runtime: RuntimePlugin, pid: number | null | undefined): Promise<void> {
  let left: string[] = [];
  for (let i = 0; i < 40; i++) {
    left = (await runtime.listManaged()).filter((m) => m.labels[LABELS.owner] === String(pid)).map((m) =>
      m.name
    );
    if (!left.length) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.deepEqual(left, [], "containers left behind by the server");
}
