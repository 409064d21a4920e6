/**
 * The lean path (lean_calls.ts, the default for stdio servers) against a hostile server
 * (tests/testdata/servers/hostile_server.ts): it must apply exactly the checks of the SDK path, so a
 * result whose outputSchema pattern backtracks is checked in the worker (result_validation.ts) and fails
 * its own call at the deadline, while the event loop keeps ticking and the same server's other calls
 * keep being answered. Pings through a whole `codemode serve` are in hostile_upstream_test.ts; this one
 * proves the calls there take the lean path and names what would stall if they did not.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { ServerSpec } from "../../core/contracts/discovery.ts";
import { UpstreamCallError, UpstreamPool } from "../../core/upstream/pool.ts";
import { VALIDATION_DEADLINE_MS } from "../../core/upstream/result_validation.ts";
import { ROOT } from "./_serve.ts";

const HOSTILE: ServerSpec = {
  name: "hostile",
  transport: "stdio",
  command: join(ROOT, "node_modules/.bin/deno"),
  args: [
    "run",
    "-A",
    "--quiet",
    "--config",
    join(ROOT, "deno.json"),
    join(ROOT, "tests/testdata/servers/hostile_server.ts"),
    "--redos",
    "--escapes",
  ],
  source: { plugin: "test", file: "test", key: "hostile" },
};
/**
 * `^(a+)+$` against 31 a's and a "!": about 25 s of backtracking on this machine's V8 (it doubles per
 * character), so a check on the event loop could not hide behind the bounds below.
 */
const BACKTRACKING = 31;
/** Longest the event loop may fall behind a 25 ms timer while the check runs: generous for a loaded CI. */
const LAG_MS = 2000;

/** Runs `fn` while a 25 ms interval measures how far the event loop falls behind; the worst lag. */
async function withLagProbe<T>(fn: () => Promise<T>): Promise<{ value: T; worstLagMs: number }> {
  let worstLagMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worstLagMs = Math.max(worstLagMs, now - last - 25);
    last = now;
  }, 25);
  try {
    return { value: await fn(), worstLagMs };
  } finally {
    clearInterval(timer);
  }
}

Deno.test({
  name:
    "the lean path checks a backtracking outputSchema in the worker: its call fails at the deadline, the loop and the server's other calls go on",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const pool = new UpstreamPool([HOSTILE]);
    try {
      await pool.listTools("hostile");
      // The lean path is the one taken: only it hands back the server's own response text.
      const add = await pool.callToolReply("hostile", "good_add", { a: 1, b: 2 });
      assert.deepEqual(add.result.structuredContent, { sum: 3 });
      assert.equal(typeof add.json, "string", "good_add did not take the lean path");
      assert.deepEqual(JSON.parse(add.json!).result.structuredContent, { sum: 3 });

      const started = performance.now();
      let settled = false;
      const echoes: number[] = [];
      const { value: outcome, worstLagMs } = await withLagProbe(async () => {
        const redos = pool.callToolReply("hostile", "redos_match", { n: BACKTRACKING })
          .then(() => "passed", (error: Error) => error)
          .finally(() => (settled = true));
        // The same server answers other calls meanwhile (good_echo has no outputSchema to queue behind).
        while (!settled) {
          const t = performance.now();
          const echo = await pool.callToolReply("hostile", "good_echo", { message: `ping ${echoes.length}` });
          assert.equal(
            echo.result.content[0].type === "text" && echo.result.content[0].text,
            `ping ${echoes.length}`,
          );
          echoes.push(performance.now() - t);
        }
        return await redos;
      });
      const elapsed = performance.now() - started;
      assert.ok(outcome instanceof UpstreamCallError, `the backtracking result ${String(outcome)}`);
      assert.match(
        outcome.message,
        /redos_match.*refused: checking results against the tool's outputSchema took longer/,
      );
      assert.ok(worstLagMs < LAG_MS, `the event loop fell ${Math.round(worstLagMs)} ms behind`);
      assert.ok(echoes.length >= 3, `only ${echoes.length} other calls were answered during the check`);
      // The deadline is the worker's own (its start on a loaded machine comes on top): far below 25 s.
      assert.ok(elapsed < VALIDATION_DEADLINE_MS + 10_000, `the call took ${Math.round(elapsed)} ms to fail`);

      // A fresh worker checks the next result; an error result carries no text of the server's to pass on.
      const again = await pool.callToolReply("hostile", "good_add", { a: 2, b: 3 });
      assert.deepEqual(again.result.structuredContent, { sum: 5 });
      const evil = await pool.callToolReply("hostile", "evil_error", {});
      assert.equal(evil.result.isError, true);
      assert.equal(
        evil.json,
        undefined,
        "an error result goes the redacted way, not verbatim to the sandbox",
      );
    } finally {
      await pool.close();
    }
  },
});
