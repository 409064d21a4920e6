/**
 * Who reads the sandbox's frames: the session's event loop (which every run executes in) reads them, and a
 * thread steps in when the loop thread blocks in a synchronous call or stops reading (CPU-bound code).
 * Each case runs on podman (the direct socket) and docker (the engine's stdio pipes).
 * @module
 */
import assert from "node:assert/strict";
import { serve, type Served } from "./_serve.ts";

for (const runtime of ["podman", "docker"]) {
  const test = (name: string, fn: (s: Served) => Promise<void>) =>
    Deno.test({ name: `${runtime}: ${name}`, sanitizeOps: false, sanitizeResources: false }, async () => {
      const served = await serve({ CODEMODE_RUNTIME: runtime });
      try {
        await fn(served);
      } finally {
        await served.close();
      }
    });

  test("synchronous calls made on the loop thread inside an async cell are answered", async (s) => {
    const r = await s.run(
      `
import asyncio
first = await mcp_everything.echo(message="a")
names = dir(mcp_everything)           # a blocking call while the loop reads the channel
help_text = mcp_everything.echo.__doc__
second = await mcp_everything.echo(message="b")
(first, "echo" in names, bool(help_text), second)`,
      30,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(r.structured.value, "('Echo: a', True, True, 'Echo: b')");
  });

  test("a user thread's synchronous calls are answered while the loop awaits", async (s) => {
    const r = await s.run(
      `
import asyncio, threading
results = []
def work():
    for _ in range(5):
        results.append(len(dir(mcp_everything)) > 3)
thread = threading.Thread(target=work)
thread.start()
echoes = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(50)])
await asyncio.to_thread(thread.join)
(results, echoes[49], len(echoes))`,
      30,
    );
    assert.equal(r.isError, false, r.text);
    assert.equal(r.structured.value, "([True, True, True, True, True], 'Echo: 49', 50)");
  });

  test("cancelling CPU-bound code in an async cell interrupts it, and the session goes on", async (s) => {
    await s.run("kept = await mcp_everything.echo(message='kept')", 30);
    const controller = new AbortController();
    let spinning!: () => void;
    const started = new Promise<void>((resolve) => (spinning = resolve));
    const call = s.client.callTool({
      name: "run_python",
      arguments: {
        code: "await mcp_everything.echo(message='x')\nprint('spinning', flush=True)\nwhile True:\n    pass",
      },
    }, { signal: controller.signal, onprogress: () => spinning() });
    await started;
    const cancelledAt = performance.now();
    controller.abort("stop");
    await assert.rejects(call);
    // The default timeout is 30 s: an answer within 20 s means the interrupt frame got through.
    const after = await s.client.callTool({
      name: "run_python",
      arguments: { code: "(kept, await mcp_everything.echo(message='after'))" },
    }, { timeout: 20_000 });
    assert.equal((after.content as { text: string }[])[0].text, "('Echo: kept', 'Echo: after')");
    assert.ok(performance.now() - cancelledAt < 20_000);
  });

  test("a timeout in an async cell that spins still ends the run, and the next run reads frames", async (s) => {
    const r = await s.run("await mcp_everything.echo(message='x')\nwhile True:\n    pass", 1);
    assert.equal(r.isError, true);
    assert.match(r.text, /Timed out after 1s/);
    const next = await s.run("await mcp_everything.echo(message='next')", 30);
    assert.equal(next.structured.value, "'Echo: next'");
  });
}
