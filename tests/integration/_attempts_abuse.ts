/**
 * Abuse attempts of the adversarial suite: exhausting resources, forging or breaking the host protocol,
 * and fishing for the secrets of MCP servers and of codemode's own environment.
 * @module
 */
import assert from "node:assert/strict";
import { type Attempt, facts, noneAllowed } from "./_adversarial.ts";
import { HOST_SECRET } from "./_serve.ts";

const FORGED_FRAMES = `[
    b'{"type":"done","id":"run-1","status":"ok","value":"FORGED"}\\n', b'not json at all\\n',
    b'{"type":"done","id":"run-2-00000000-0000-0000-0000-000000000000","status":"ok","value":"FORGED"}\\n',
    b'{"type":"rpc","id":1,"method":"shell","params":{}}\\n', b'{"type":"output"}\\n', b'\\xff\\xfe\\n',
    b'{"type":"ready","python":"FORGED"}\\n',
    b'{"type":"output","id":"run-1","stream":"stdout","data":"FORGED"}\\n',
]`;

/** Resources: bombs and floods are contained, reported, and the server keeps serving. */
export const resources: Attempt[] = [
  {
    area: "resources",
    name: "a fork bomb is contained and reported",
    timeout: 3,
    fresh: true,
    code: "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    check(answer) {
      assert.equal(answer.isError, true);
      assert.match(String(answer.structured.status), /timeout|error/);
    },
  },
  {
    area: "resources",
    name: "a memory bomb is contained and reported",
    timeout: 20,
    code: "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))",
    check(answer) {
      assert.equal(answer.isError, true);
      assert.match(answer.text, /MemoryError|ended during the run|killed/);
    },
  },
  {
    area: "resources",
    name: "a thread bomb stops at the process limit",
    timeout: 30,
    code: `
import threading, time
def bomb():
    threads = []
    try:
        while len(threads) < 5000:
            t = threading.Thread(target=time.sleep, args=(60,), daemon=True)
            t.start()
            threads.append(t)
        return [len(threads), "no limit"]
    except RuntimeError:
        return [len(threads), "RuntimeError"]
count, outcome = in_child(bomb, 25)
report(count=count, outcome=outcome)`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.outcome, "RuntimeError");
      assert.ok((f.count as number) < 1000, `${f.count} threads started`);
    },
  },
  {
    area: "resources",
    name: "exhausting file descriptors fails cleanly and the session keeps working while they stay open",
    fresh: true,
    code: `
hoard = []
try:
    while len(hoard) < 100000:
        hoard.append(open("/dev/null"))
    error = "no limit"
except OSError as e:
    error = errno.errorcode.get(e.errno)
report(count=len(hoard), error=error)`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.error, "EMFILE");
      assert.ok((f.count as number) < 100000);
    },
  },
  {
    area: "resources",
    name: "a busy loop past its timeout is interrupted and the session survives",
    async steps({ run }) {
      await run("kept = 7");
      const spin = await run("while True:\n    pass", 2);
      assert.equal(spin.structured.status, "timeout");
      assert.notEqual(spin.structured.session_lost, true);
      assert.equal((await run("kept")).structured.value, "7");
    },
  },
  {
    area: "resources",
    name: "a loop that ignores SIGINT is killed after the grace period and the session is reported lost",
    timeout: 2,
    code: "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    check(answer) {
      assert.equal(answer.structured.status, "timeout");
      assert.equal(answer.structured.session_lost, true);
    },
  },
  {
    area: "resources",
    name: "a regular expression that never releases the GIL is killed past its timeout",
    timeout: 2,
    code: "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')",
    check(answer) {
      assert.equal(answer.structured.status, "timeout");
      assert.equal(answer.structured.session_lost, true);
    },
  },
  {
    area: "resources",
    name: "unbounded recursion with the recursion limit lifted is contained",
    timeout: 20,
    code: "sys.setrecursionlimit(10**8)\ndef down(n):\n    return down(n + 1) + 1\ndown(0)",
    check(answer) {
      assert.equal(answer.isError, true);
      if (answer.structured.session_lost !== true) assert.match(answer.text, /RecursionError|MemoryError/);
    },
  },
  {
    area: "resources",
    name: "10 MB without a newline on fd 1 is truncated at the cap and stated",
    code: "os.write(1, b'x' * 10_000_000)\n'after'",
    check(answer) {
      assert.equal(answer.isError, false, answer.text.slice(0, 300));
      assert.equal(String(answer.structured.stdout).length, 256 * 1024);
      assert.match(JSON.stringify(answer.structured.notes), /stdout truncated/);
      assert.equal(answer.structured.value, "'after'");
    },
  },
  {
    area: "resources",
    name: "a child process flooding stderr is capped and stated",
    code: `subprocess.run(["sh", "-c", "head -c 30000000 /dev/zero | tr '\\\\0' e >&2"])\n'after'`,
    check(answer) {
      assert.equal(answer.structured.value, "'after'", answer.text.slice(0, 300));
      assert.ok(String(answer.structured.stderr).length <= 256 * 1024);
      assert.match(JSON.stringify(answer.structured.notes), /stderr truncated/);
    },
  },
  {
    area: "resources",
    name: "a million tiny writes come back bounded",
    timeout: 60,
    code: "for i in range(1_000_000):\n    print(i)\n'after'",
    check(answer) {
      assert.equal(answer.structured.value, "'after'", answer.text.slice(0, 300));
      assert.ok(String(answer.structured.stdout).length <= 256 * 1024);
    },
  },
  {
    area: "resources",
    name: "twenty thousand concurrent host calls are all answered",
    timeout: 60,
    code: `
import asyncio
from mcp import runtime
answers = await asyncio.gather(*[runtime.list_servers() for _ in range(20_000)], return_exceptions=True)
report(ok=sum(isinstance(a, tuple) for a in answers), errors=sorted({type(a).__name__ for a in answers if not isinstance(a, tuple)}))`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.ok, 20_000, JSON.stringify(f.errors));
    },
  },
  {
    area: "resources",
    name: "binary output and a closed stdin do not break the channel",
    code: "os.write(1, bytes(range(256)) * 4)\nos.close(0)\nos.write(2, b'\\x00\\x01\\xff')\n'ok'",
    check(answer) {
      assert.equal(answer.isError, false, answer.text.slice(0, 300));
      assert.equal(answer.structured.value, "'ok'");
    },
  },
  {
    area: "resources",
    name: "killing the runtime loses the session, says so, and the next call starts fresh",
    async steps({ run }) {
      await run("marker = 1");
      // PID 1 is the engine's init, which the kernel shields inside its namespace; the runtime is not.
      const r = await run(
        "os.kill(1, signal.SIGKILL)\nos.kill(os.getpid(), signal.SIGKILL)\nimport time\ntime.sleep(5)",
        10,
      );
      assert.equal(r.isError, true);
      assert.equal(r.structured.session_lost, true);
      assert.equal((await run("'marker' in globals()")).structured.value, "False");
    },
  },
  {
    area: "resources",
    name: "a huge final value and a huge exception message come back bounded",
    async steps({ run }) {
      const v = await run("'x' * 50_000_000");
      assert.equal(v.isError, false);
      assert.ok(String(v.structured.value).length < 2_000_000);
      const e = await run("raise ValueError('y' * 50_000_000)");
      assert.equal(e.isError, true);
      assert.ok(String(e.structured.error).length < 2_000_000);
    },
  },
];

/** Protocol: forged, malformed and oversized frames and hostile RPCs are refused, never obeyed. */
export const protocol: Attempt[] = [
  {
    area: "protocol",
    name: "forged and malformed frames written to every open descriptor are not obeyed",
    code: `
written = 0
for fd in map(int, os.listdir("/proc/self/fd")):
    if fd > 2:
        for frame in ${FORGED_FRAMES}:
            try:
                os.write(fd, frame)
                written += 1
            except OSError:
                pass
print("wrote", written > 0)
'genuine'`,
    check(answer) {
      assert.equal(answer.isError, false, answer.text.slice(0, 500));
      assert.equal(answer.structured.value, "'genuine'");
      assert.doesNotMatch(answer.text, /FORGED/);
    },
  },
  {
    area: "protocol",
    name: "frames forged through /proc paths of the runtime and of PID 1 are not obeyed",
    code: `
opened = []
# fds 0-2 of the runtime are its own captured output; everything else, and PID 1's stdio, is fair game.
paths = [f"/proc/self/fd/{fd}" for fd in os.listdir("/proc/self/fd") if int(fd) > 2]
paths += [f"/proc/1/fd/{fd}" for fd in (0, 1, 2, 3)]
for path in paths:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    opened.append(path)
    for frame in ${FORGED_FRAMES}:
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os.close(fd)
print(len(opened), "opened")
'genuine'`,
    check(answer) {
      // PID 1's stdout and stderr may lead to the run's output, where the bytes show up as text: shown,
      // not obeyed. Nothing else may change.
      assert.equal(answer.isError, false, answer.text.slice(0, 500));
      assert.equal(answer.structured.value, "'genuine'");
      assert.equal(answer.structured.status, "ok");
      assert.doesNotMatch(JSON.stringify([answer.structured.error, answer.structured.notes]), /FORGED/);
    },
  },
  {
    area: "protocol",
    name: "a 20 MB line on the protocol channel is dropped without harming the host",
    timeout: 20,
    code: `
import threading
line = b"{" + b"x" * 20_000_000 + b"}\\n"
def flood(fd):
    try:
        os.write(fd, line)
    except OSError:
        pass
for fd in map(int, os.listdir("/proc/self/fd")):
    if fd > 2:
        t = threading.Thread(target=flood, args=(fd,), daemon=True)
        t.start()
        t.join(10)
'genuine'`,
    check(answer) {
      // The flood may swallow the real done frame (the line ends only at the next newline); then the run
      // times out and the sandbox is replaced. Either way the call is answered and nothing is obeyed.
      if (answer.structured.session_lost !== true) assert.equal(answer.structured.value, "'genuine'");
      assert.doesNotMatch(answer.text, /FORGED/);
    },
  },
  {
    area: "protocol",
    name: "unknown host methods and Object.prototype member names are refused",
    code: `
from codemode_runtime import context
rpc = context.current().rpc
names = ["nope", "constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "__defineGetter__",
         "isPrototypeOf", "call_tool\\x00", "../call_tool", ""]
def outcome(name):
    try:
        return "answered " + repr(rpc.call_sync(name, {"server": "everything"}))[:100]
    except Exception as e:
        return type(e).__name__ + ": " + str(e)[:100]
report(results={name: outcome(name) for name in names})`,
    check(answer) {
      const results = facts(answer).results as Record<string, string>;
      const wrong = Object.entries(results).filter(([, v]) =>
        !/^NotImplementedError: Unknown host method/.test(v)
      );
      assert.deepEqual(wrong, [], "every unknown method must be refused as unknown");
    },
  },
  {
    area: "protocol",
    name: "hostile RPC parameters are refused cleanly and pollute nothing",
    timeout: 30,
    code: `
import asyncio
from codemode_runtime import context
from mcp import runtime
rpc = context.current().rpc
async def outcome(method, params):
    try:
        value = await asyncio.wait_for(rpc.call(method, params), 10)
        return "answered " + repr(value)[:80]
    except Exception as e:
        return type(e).__name__
pollution = {"__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}}
results = {
    "huge tool name": await outcome("call_tool", {"server": "everything", "tool": "x" * 5_000_000}),
    "proto server": await outcome("call_tool", {"server": "__proto__", "tool": "echo"}),
    "constructor server": await outcome("describe_server", {"name": "constructor"}),
    "polluting arguments": await outcome("call_tool", {"server": "everything", "tool": "echo",
                                                       "arguments": {"message": "hi", **pollution}}),
    "polluting params": await outcome("list_servers", pollution),
    "list as arguments": await outcome("call_tool", {"server": "everything", "tool": "echo", "arguments": [1]}),
    "list as params": await outcome("list_tools", ["everything"]),
    "null params": await outcome("list_tools", None),
    "huge limit": await outcome("search_tool_docs", {"query": "echo", "limit": 10**12}),
    "huge query": await outcome("search_tool_docs", {"query": "echo " * 200_000}),
}
after = json.dumps([await runtime.list_servers(), runtime.describe_server("everything")])
report(results=results, polluted="polluted" in after)`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.polluted, false);
      const results = f.results as Record<string, string>;
      for (const key of ["huge tool name", "proto server", "constructor server", "list as arguments"]) {
        assert.doesNotMatch(results[key], /^answered/, `${key}: ${results[key]}`);
      }
      // Every call is answered, even one whose params are not an object: none may wait for its timeout.
      const unanswered = Object.entries(results).filter(([, v]) => v === "TimeoutError");
      assert.deepEqual(unanswered, [], "host calls left unanswered");
    },
  },
  {
    area: "protocol",
    name: "server names with path traversal or odd characters resolve to no other server",
    code: `
import importlib
from mcp import runtime
async def outcome(fn):
    try:
        value = fn()
        if hasattr(value, "__await__"):
            value = await value
        return "answered " + json.dumps(value, default=repr)[:120]
    except Exception as e:
        return type(e).__name__
names = ["../everything", "everything/../memory", "..", "/", "everything\\x00", "../../etc/passwd", "%2e%2e%2fetc"]
results = {n: await outcome(lambda: runtime.describe_server(n)) for n in names}
results["list_tools traversal"] = await outcome(lambda: runtime.list_tools("../memory"))
results["import traversal"] = await outcome(lambda: importlib.import_module("mcp.servers.../etc"))
results["call traversal"] = await outcome(lambda: runtime.call_tool("../../etc/passwd", "echo", {}))
report(results=results, odd_name=runtime.describe_server("___etc")["name"])`,
    check(answer) {
      const f = facts(answer);
      noneAllowed(
        Object.fromEntries(
          Object.entries(f.results as Record<string, string>).map((
            [k, v],
          ) => [k, v.startsWith("answered") ? "allowed" : v]),
        ),
        "lookups of unknown server names",
      );
      assert.equal(f.odd_name, "../etc", "a configured odd name is just a name");
    },
  },
  {
    area: "protocol",
    name: "hostile run_python arguments from the client get error results, not a broken server",
    async steps({ served }) {
      const calls: Record<string, unknown>[] = [
        { code: "# " + "x".repeat(5_000_000) + "\n'big source'" },
        { code: "1", timeout: -1 },
        { code: "1", timeout: 1e308 },
        { code: 123 },
        { code: "1", servers: Array.from({ length: 1000 }, (_, i) => `missing-${i}`) },
        { code: "1", servers: ["../etc", "__proto__"] },
        { code: "1", unexpected: { __proto__: { polluted: true } } },
      ];
      for (const args of calls) {
        const r = await served.client.callTool({ name: "run_python", arguments: args }, { timeout: 60_000 });
        assert.ok(Array.isArray(r.content), `no result for ${JSON.stringify(args).slice(0, 80)}`);
      }
      await assert.rejects(served.client.callTool({ name: "run_shell", arguments: { code: "id" } }));
    },
  },
];

/** Secrets: nothing sandbox code can read carries a configured secret or codemode's environment. */
export const secrets: Attempt[] = [
  {
    area: "secrets",
    name: "server configs' env, args, headers and URLs reach nothing sandbox code can read",
    timeout: 60,
    code: `
from codemode_runtime import context
from mcp import runtime
seen = {}
async def grab(key, fn):
    try:
        value = fn()
        if hasattr(value, "__await__"):
            value = await value
        seen[key] = value
    except Exception as e:
        seen[key] = type(e).__name__ + ": " + str(e)
await grab("list_servers", runtime.list_servers)
for name in runtime.discovered_servers():
    if not name.startswith("diagnostics"):
        await grab("describe " + name, lambda: runtime.describe_server(name))
await grab("discovered", lambda: runtime.discovered_servers(detailed=True))
await grab("capabilities", runtime.capability_summary)
await grab("metadata", runtime.list_loaded_server_metadata)
for q in ("vault", "credentials", "token", "key", "Bearer", "secret", SECRETS[0]):
    await grab("search " + q, lambda: runtime.search_tool_docs(q, limit=50))
await grab("docs", lambda: runtime.query_tool_docs("vault", detail="full"))
await grab("remote call", lambda: mcp_remote.echo(message="x"))
await grab("unknown tool", lambda: mcp_vault.no_such_tool())
await grab("tool error", mcp_vault.fail)
await grab("config", lambda: context.current().config)
await grab("environ", lambda: dict(os.environ))
def proc(kind):
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                out[p] = open(f"/proc/{p}/{kind}", "rb").read().decode(errors="replace")
            except OSError:
                pass
    return out
await grab("proc environ", lambda: proc("environ"))
await grab("proc cmdline", lambda: proc("cmdline"))
report(leaks={k: redact(v)[:600] for k, v in seen.items() if leaks(v)}, servers=list(seen["list_servers"]),
       vault_described="tools" in seen["describe vault"])`,
    check(answer) {
      const f = facts(answer);
      assert.deepEqual(f.leaks, {});
      assert.ok((f.servers as string[]).includes("vault") && (f.servers as string[]).includes("remote"));
      assert.equal(f.vault_described, true);
    },
  },
  {
    area: "secrets",
    name:
      "error messages of failing servers carry no configured secret (stderr of a failed start, an HTTP error body)",
    code: `
found = {}
for name, call in (("stderr at start", lambda: mcp_diagnostics.echo(message="x")),
                   ("http error body", lambda: mcp_servers["diagnostics-http"].echo(message="x"))):
    try:
        await call()
        found[name] = "answered"
    except Exception as e:
        message = str(e)
        found[name] = {"leaks": leaks(message), "message": redact(message)}
report(found=found)`,
    check(answer) {
      const found = facts(answer).found as Record<string, { leaks: boolean; message: string }>;
      const leaking = Object.entries(found).filter(([, outcome]) => outcome.leaks);
      assert.deepEqual(leaking, [], "error messages quote a secret (shown as <SECRET>)");
    },
  },
  {
    area: "secrets",
    name: "the tool list and the capabilities resource carry no secret",
    async steps({ served, fix }) {
      const listed = JSON.stringify(await served.client.listTools());
      const resource = JSON.stringify(await served.client.readResource({ uri: "codemode://capabilities" }));
      for (const secret of fix.secrets) {
        assert.ok(
          !listed.includes(secret) && !resource.includes(secret),
          "a secret is in the tool list or resource",
        );
      }
    },
  },
];

/** Host environment: codemode's own environment reaches neither the sandbox nor upstream servers. */
export const hostEnv: Attempt[] = [
  {
    area: "host env",
    name: "codemode's environment does not reach the sandbox",
    code: `
texts = [json.dumps(dict(os.environ))]
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            texts.append(open(f"/proc/{p}/environ", "rb").read().decode(errors="replace"))
        except OSError:
            pass
host = bytes.fromhex("${hex(HOST_SECRET)}").decode()
report(host_secret=any(host in t for t in texts), codemode_vars=[k for k in os.environ if k.startswith("CODEMODE")])`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.host_secret, false);
      assert.deepEqual(f.codemode_vars, []);
    },
  },
  {
    area: "host env",
    name: "codemode's environment does not reach upstream servers, as their own tools report it",
    code: `
env = json.dumps(await mcp_everything.get_env(), default=repr)
host = bytes.fromhex("${hex(HOST_SECRET)}").decode()
report(host_secret=host in env, has_path="PATH" in env)`,
    check(answer) {
      const f = facts(answer);
      assert.equal(f.has_path, true, answer.text.slice(0, 300));
      assert.equal(f.host_secret, false);
    },
  },
];

function hex(text: string): string {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join("");
}
