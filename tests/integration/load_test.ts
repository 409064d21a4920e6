/**
 * Load: one `codemode serve --http` on podman, 20 concurrent clients, each making 50 run_python calls
 * that call server-everything's echo and get-sum. Every call must be answered with the right values,
 * each session must keep its own state, no secret (the HTTP token, codemode's environment, the upstream
 * server's env) may show up in any result, and no container may be left once the server has stopped.
 * Takes ~20 s on 2 busy cores (load average 5-6); prints runs/s (scripts/bench_load.ts records figures).
 */
import assert from "node:assert/strict";
import { fakeHome, HOST_SECRET, SERVER_SECRET } from "./_serve.ts";
import { connectHttp, containersLabelled, type HttpClient, startHttpServe } from "./_serve_http.ts";
import { LABELS } from "../../core/sandbox/session_manager.ts";
import { podman } from "../../plugins/runtime/podman.ts";
import { TEST_IMAGE } from "./_harness.ts";

const CLIENTS = 20;
const RUNS = 50;
const TOKEN = "load-token-93b1f0c2";
const SECRETS = [TOKEN, HOST_SECRET, SERVER_SECRET];

const runtime = podman();
const usable = (await runtime.detect()).available && await runtime.imageExists(TEST_IMAGE);
if (!usable) console.warn(`IGNORED load suite: podman or image ${TEST_IMAGE} missing`);

/** One call's code: proxied calls whose answers depend on the client and the run, plus session state. */
function program(client: number, run: number): string {
  const snoop = run === 0 || run === RUNS - 1
    // First and last run also go looking for secrets where sandbox code could find them.
    ? `import os\nseen = str(dict(os.environ)) + open("/proc/self/environ", "rb").read().decode("latin-1")\n`
    : `seen = ""\n`;
  return `${snoop}calls = calls + 1 if "calls" in globals() else 1
echo, total = await asyncio.gather(
    mcp_everything.echo(message="c${client}-r${run}"),
    mcp_everything.get_sum(a=${client}, b=${run}),
)
(calls, echo, total, [s for s in ${JSON.stringify(SECRETS)} if s in seen])`;
}

function expected(client: number, run: number): string {
  return `(${run + 1}, 'Echo: c${client}-r${run}', 'The sum of ${client} and ${run} is ${
    client + run
  }.', [])`;
}

Deno.test({
  name: "20 clients x 50 tool-calling runs are all answered correctly, leak no secret and leave no container",
  ignore: !usable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const served = await startHttpServe(fakeHome(), {
      CODEMODE_RUNTIME: "podman",
      CODEMODE_HTTP_TOKEN: TOKEN,
      CODEMODE_LOG_LEVEL: "warn",
      CODEMODE_TIMEOUT: "60",
    });
    const started = performance.now();
    const failures: string[] = [];
    let answered = 0;
    const clients: HttpClient[] = [];
    try {
      await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
        const client = await connectHttp(served.url, { authorization: `Bearer ${TOKEN}` });
        clients.push(client);
        await client.run("import asyncio");
        for (let r = 0; r < RUNS; r++) {
          const result = await client.run(program(c, r), 60);
          answered++;
          const leaked = SECRETS.filter((s) => result.text.includes(s));
          if (leaked.length) failures.push(`client ${c} run ${r}: a secret is visible`);
          else if (result.isError || result.value !== expected(c, r)) {
            failures.push(`client ${c} run ${r}: ${result.text.slice(0, 300)}`);
          }
        }
      }));
      const seconds = (performance.now() - started) / 1000;
      console.log(
        `load: ${answered} runs in ${seconds.toFixed(1)} s (${(answered / seconds).toFixed(1)} runs/s), ` +
          `${failures.length} wrong`,
      );
      assert.deepEqual(failures.slice(0, 5), []);
      assert.equal(answered, CLIENTS * RUNS);
      assert.equal((await containersLabelled(LABELS.owner, served.pid)).length, CLIENTS);
    } finally {
      await Promise.allSettled(clients.map((c) => c.end()));
      assert.equal(await served.stop("SIGTERM"), 0);
    }
    assert.deepEqual(await containersLabelled(LABELS.owner, served.pid), []);
    assert.equal(served.stdout(), "");
    for (const secret of SECRETS) assert.ok(!served.stderr().includes(secret), "a secret reached the logs");
  },
});
