/**
 * The sandbox side of approvals and dry runs, run with the host's own python3 (no container): the
 * `pause`/`resume` frames stop and restart an execution's timeout (process watchdog and embedded
 * session), and `runtime.dry_run()` marks the calls made inside it, and only those.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { BOOTSTRAP_SOURCE, MODULES, PACKAGES } from "../../sandbox/source.ts";
import { type RpcFrame, withPython } from "./_local_python.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("a paused execution outlives its timeout while the host waits, and its clock runs again after", async () => {
  await withPython(async (python) => {
    const id = "paused";
    // One call that the host takes 1.5 s to answer with a 0.5 s timeout: only the pause can save it.
    python.send({
      type: "execute",
      id,
      code: "r = await mcp_my_server.echo(message='q')\nr['arguments']",
      timeout: 0.5,
    });
    const rpc = await python.next();
    assert.equal(rpc.type, "rpc");
    python.send({ type: "pause", id });
    await sleep(1500);
    python.answer(rpc as RpcFrame, { value: { arguments: { message: "q" } } });
    python.send({ type: "resume", id });
    assert.deepEqual(await python.next(), { type: "done", id, status: "ok", value: "{'message': 'q'}" });

    // The clock restarts with what was left: a busy loop after the wait still times out.
    python.send({
      type: "execute",
      id: "then-busy",
      code: "await mcp_my_server.echo()\nwhile True: pass",
      timeout: 0.5,
    });
    const call = await python.next();
    python.send({ type: "pause", id: "then-busy" });
    await sleep(800);
    python.answer(call as RpcFrame, { value: null });
    python.send({ type: "resume", id: "then-busy" });
    const busy = await python.next();
    assert.equal(busy.type === "done" && busy.status, "timeout");
  });
});

Deno.test("without a pause, or with a pause for another execution, the timeout fires as usual", async () => {
  await withPython(async (python) => {
    for (const pauseId of [undefined, "someone-else"]) {
      const id = `unpaused-${pauseId ?? "none"}`;
      python.send({ type: "execute", id, code: "await mcp_my_server.echo()", timeout: 0.5 });
      const rpc = await python.next();
      if (pauseId) python.send({ type: "pause", id: pauseId });
      await sleep(1500);
      const done = await python.next();
      assert.equal(done.type === "done" && done.status, "timeout", JSON.stringify(done));
      python.answer(rpc as RpcFrame, { value: null }); // late: ignored
      assert.equal((await python.execute("1 + 1")).done.value, "2");
    }
  });
});

Deno.test("runtime.dry_run() marks the calls made inside it, under gather too, and only those", async () => {
  await withPython(async (python) => {
    const answer = (rpc: RpcFrame) => ({ value: rpc.params.dry_run === true ? null : "made" });
    const run = await python.execute(
      `from mcp import runtime
import asyncio
out = [await mcp_my_server.echo(message="before")]
async with runtime.dry_run() as plan:
    out.append(await mcp_my_server.echo(message="async"))
    out += await asyncio.gather(*[mcp_my_server.echo(message=str(i)) for i in range(3)])
    out.append(await runtime.call_tool("my-server", "echo", {"message": "helper"}))
with runtime.dry_run():
    out.append(await mcp_my_server.echo(message="sync"))
out.append(await mcp_my_server.echo(message="after"))
out, repr(plan).startswith("<dry run")`,
      { answer },
    );
    assert.equal(run.done.status, "ok", run.done.error);
    assert.deepEqual(
      run.rpcs.map((rpc) => [rpc.params.arguments, rpc.params.dry_run ?? false]),
      [
        [{ message: "before" }, false],
        [{ message: "async" }, true],
        [{ message: "0" }, true],
        [{ message: "1" }, true],
        [{ message: "2" }, true],
        [{ message: "helper" }, true],
        [{ message: "sync" }, true],
        [{ message: "after" }, false],
      ],
    );
    assert.equal(run.done.value, "(['made', None, None, None, None, None, None, 'made'], True)");
    // An exception inside the block still ends it.
    const raised = await python.execute(
      `try:
    with runtime.dry_run():
        raise ValueError("boom")
except ValueError:
    pass
await mcp_my_server.echo(message="x")`,
      { answer },
    );
    assert.equal(raised.rpcs[0].params.dry_run, undefined);
    assert.equal(raised.done.value, "'made'");
  });
});

Deno.test("EmbeddedSession's timeout stops between pause and resume", () => {
  const script = `
import asyncio, json, sys
ns = {"__name__": "codemode_bootstrap"}
exec(${JSON.stringify(BOOTSTRAP_SOURCE)}, ns)
ns["install"](*json.loads(sys.stdin.read()))
from codemode_runtime.embedded import EmbeddedSession
lines, real_stdout = [], sys.stdout
async def main():
    session = EmbeddedSession({"servers": [{"name": "s", "alias": "s"}]}, lines.append)
    def on_line(line):
        lines.append(line)
        frame = json.loads(line)
        if frame["type"] != "rpc":
            return
        async def answer_late():
            if frame["params"]["arguments"].get("pause"):
                await session.handle({"type": "pause", "id": "e1"})
            await asyncio.sleep(0.8)
            await session.handle({"type": "rpc_result", "id": frame["id"], "ok": True, "value": 1})
            await session.handle({"type": "resume", "id": "e1"})
        asyncio.ensure_future(answer_late())
    session._write = on_line
    await session.handle({"type": "execute", "id": "e1", "code": "await mcp_s.echo(pause=True)", "timeout": 0.3})
    await session.handle({"type": "execute", "id": "e2", "code": "await mcp_s.echo(pause=False)", "timeout": 0.3})
asyncio.run(main())
sys.stdout = real_stdout
print(json.dumps([json.loads(line) for line in lines if '"done"' in line]))
`;
  // The modules go in on stdin: as one argument they would pass Linux's 128 KiB limit on an argument.
  const result = spawnSync("python3", ["-I", "-c", script], {
    encoding: "utf8",
    input: JSON.stringify([MODULES, PACKAGES]),
  });
  assert.equal(result.error, undefined);
  assert.equal(result.stderr, "");
  const [paused, unpaused] = JSON.parse(result.stdout);
  assert.deepEqual(paused, { type: "done", id: "e1", status: "ok", value: "1" });
  assert.equal(unpaused.status, "timeout");
});

Deno.test("pause and resume frames read while the watchdog steps in to read never deadlock the channel", () => {
  // The loop reads frames and a pause takes the watchdog's lock; the watchdog's stall check reads frames
  // too. When it did so holding its own lock, the two could wait for each other for good (seen on CI: a
  // run with six approval questions hung until its deadline). Frames come fast and the check runs every
  // 0.1 ms, so the old code locked up in 5 of 6 runs of this test.
  const script = `
import asyncio, json, os, socket, sys, threading, time
sys.path.insert(0, ${JSON.stringify(new URL("../../sandbox", import.meta.url).pathname)})
from codemode_runtime.channel import Channel
from codemode_runtime.watchdog import Watchdog

host, sandbox = socket.socketpair()
channel = Channel(sandbox.fileno(), sandbox.fileno(), sock=sandbox)
loop = asyncio.new_event_loop()
dog = Watchdog(loop, stall_check=channel.stall_check, every=0.0001)
count = [0]
def on_frame(frame):
    count[0] += 1
    dog.pause() if frame["type"] == "pause" else dog.resume()
channel.serve(on_frame, lambda: None)
channel.attach(loop)
dog.arm(1000)
N = 10000
def send():
    for i in range(N):
        host.sendall((json.dumps({"type": "pause" if i % 2 == 0 else "resume", "id": "x"}) + "\\n").encode())
        time.sleep(0.00005)
threading.Thread(target=send, daemon=True).start()
def give_up():
    time.sleep(20)
    print(json.dumps({"stuck_at": count[0]}), flush=True)
    os._exit(0)
threading.Thread(target=give_up, daemon=True).start()
async def main():
    while count[0] < N:
        await asyncio.sleep(0.01)
loop.run_until_complete(main())
print(json.dumps({"read": count[0]}), flush=True)
os._exit(0)
`;
  const result = spawnSync("python3", ["-I", "-c", script], { encoding: "utf8", timeout: 60_000 });
  assert.equal(result.stderr, "");
  assert.deepEqual(JSON.parse(result.stdout), { read: 10000 });
});
